#pragma once
// OpenBLAS picks its GEMM kernels for the CPU when the library is loaded. The version in Debian 12
// (0.3.21) does not know recent Intel CPUs (Sapphire Rapids and later) and falls back to its
// generic "Prescott" kernels, two to four times slower than its AVX-512 ones on the same machine.
// Since the choice is made at load time, the fix has to come before: a program calls
// better_openblas_core() first thing in main() and, when it names a core, re-executes itself with
// OPENBLAS_CORETYPE set to it (tools/main.cpp, tests/main.cpp).
namespace linea::cpu {

// The OpenBLAS core to ask for, or nullptr when the one in use is right for this CPU or the user
// already chose one (OPENBLAS_CORETYPE is set).
const char* better_openblas_core();

// Re-executes the current program with OPENBLAS_CORETYPE set when better_openblas_core() names a
// core; returns (doing nothing) otherwise or if the re-exec fails.
void reexec_with_better_openblas_core(char** argv);

}  // namespace linea::cpu
