#pragma once
// Shared helpers for the test suite.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "autograd/ops.h"
#include "tensor/error.h"

namespace linea::testing {

// Expects `statement` to throw linea::Error whose message contains every fragment.
#define EXPECT_LINEA_ERROR(statement, ...)                                                  \
  do {                                                                                     \
    bool linea_threw_ = false;                                                             \
    try {                                                                                  \
      statement;                                                                           \
    } catch (const ::linea::Error& e) {                                                    \
      linea_threw_ = true;                                                                 \
      for (const char* fragment : {__VA_ARGS__})                                           \
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)                 \
            << "message \"" << e.what() << "\" lacks \"" << fragment << "\"";             \
    }                                                                                      \
    EXPECT_TRUE(linea_threw_) << #statement " did not throw linea::Error";                 \
  } while (0)

// Values of two tensors agree elementwise within atol + rtol * |expected|.
inline ::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol = 1e-6,
                                            double atol = 1e-8) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << actual.describe() << " vs " << expected.describe();
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    // Equal values (infinities included) and NaN against NaN are close whatever the tolerance.
    const bool same = a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i]));
    if (!same && !(std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected " << e[i];
  }
  return ::testing::AssertionSuccess();
}

// True when a CUDA device is usable; CUDA tests call GTEST_SKIP() with a message otherwise.
bool cuda_available();

#define LINEA_SKIP_WITHOUT_CUDA()                                                                  \
  do {                                                                                             \
    if (!::linea::testing::cuda_available()) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped"; \
  } while (0)

}  // namespace linea::testing
