#include <gtest/gtest.h>
#include "autograd/ops.h"
TEST(Smoke, Works) { EXPECT_EQ(linea::ones({2}).numel(), 2); }
