// The test binary's entry point: GoogleTest's, after making sure OpenBLAS runs its proper kernels
// on this CPU (cpu/blas_core.h), so timings in test logs mean what they say.
#include <gtest/gtest.h>

#include "cpu/blas_core.h"

int main(int argc, char** argv) {
  linea::cpu::reexec_with_better_openblas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
