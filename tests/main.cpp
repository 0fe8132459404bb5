// The test binary's entry point: GoogleTest's, after making sure OpenBLAS runs its proper kernels
// on this CPU (cpu/blas_core.h), so timings in test logs mean what they say.
#include <gtest/gtest.h>

#include <cstdio>

#include "cpu/blas_core.h"

int main(int argc, char** argv) {
  linea::cpu::reexec_with_better_openblas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  // ctest runs one suite a process (CMakeLists.txt here) and counts it as skipped when this line
  // appears: only when every test of the run skipped (a CUDA suite without a GPU), never when one
  // passed or failed.
  const ::testing::UnitTest& run = *::testing::UnitTest::GetInstance();
  if (run.skipped_test_count() > 0 && run.successful_test_count() == 0 && run.failed_test_count() == 0)
    std::printf("[linea] every test of this run skipped\n");
  return status;
}
