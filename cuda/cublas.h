#pragma once
// cuBLAS: one handle per device, bound to the device's stream (cuda/stream.h), so GEMMs order
// with the kernels around them. The TF32 switch is declared in cuda/backend.h (CPU code sets it).
//
// The library is opened at the first product (dlopen), not linked into the program: loading
// cuBLAS runs its initialisers and maps half a gigabyte (libcublasLt), about half a second on a
// two-core machine, which every start of a program linked to it paid before main, `linea --help`
// and a CPU-only run included. Only the header's types and enums are used at compile time.
#include <cublas_v2.h>

#include <string>
#include <vector>

namespace linea::cuda {

// The cuBLAS functions linea calls, resolved from the library when it is first opened.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasGemmStridedBatchedEx_64) gemm_strided_batched = nullptr;
  decltype(&cublasSgeam) sgeam = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Opens the first of `candidates` (file names for the loader's search, or paths) that loads, and
// resolves linea's functions in it; a linea::Error naming every candidate's failure when none
// loads, or the missing function when one lacks it. cublas() calls it with cuBLAS's versioned
// name; the tests call it with libraries that are not cuBLAS.
Cublas open_cublas(const std::vector<std::string>& candidates);

// cuBLAS, opened on the first call (thread-safe; a failure is a linea::Error naming the library
// and the loader's reason, and the next call tries again).
const Cublas& cublas();

// The handle of `device`, created on first use; the caller has made the device current
// (use_device). Lives as long as the process.
cublasHandle_t cublas_handle(int device);

}  // namespace linea::cuda
