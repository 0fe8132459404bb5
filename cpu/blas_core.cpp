#include "cpu/blas_core.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace linea::cpu {

const char* better_openblas_core() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return nullptr;
  const char* core = openblas_get_corename();
  // Only the generic fallbacks are replaced; a core OpenBLAS recognised is left alone.
  const bool generic = core == nullptr || std::strcmp(core, "Prescott") == 0 || std::strcmp(core, "prescott") == 0 ||
                       std::strcmp(core, "Unknown") == 0 || std::strcmp(core, "Core2") == 0;
  if (!generic) return nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

void reexec_with_better_openblas_core(char** argv) {
  const char* core = better_openblas_core();
  if (core == nullptr) return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the slow kernels
}

}  // namespace linea::cpu
