#pragma once
// Every CUDA runtime call is checked: a failure becomes a linea::Error naming the call and what
// linea was doing, never an abort.
#include <cuda_runtime.h>

#include "tensor/error.h"

#define LINEA_CUDA_CHECK(call, op, ...)                                                     \
  do {                                                                                      \
    const cudaError_t linea_status_ = (call);                                               \
    if (linea_status_ != cudaSuccess)                                                       \
      ::linea::fail(op, #call " failed: ", cudaGetErrorString(linea_status_) __VA_OPT__(, " ", ) __VA_ARGS__); \
  } while (0)
