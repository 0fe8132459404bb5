// What one dependent stage of a decoding step costs on this GPU, whatever its work: the floor under
// every kernel of a graphed step (docs/benchmarks.md, "decoding with one block per SM").
//
// A stage reads the whole vector the stage before it wrote (8 KB, from L2), sums it, and writes its
// block's slice of the next vector: every block depends on every block of the stage before, as a
// matrix-vector product does. Three ways to chain kStages such stages:
//   chain pdl=0   a CUDA graph of kernels, each waiting for the one before to finish;
//   chain pdl=1   the same launched with programmatic dependent launch (cuda/launch.cuh:
//                 launch_overlapped), each block waiting in griddepcontrol.wait;
//   persistent    one kernel, the stages separated by a grid-wide barrier (an arrival counter and a
//                 generation flag in global memory).
// Build and run on the GPU machine (not part of the CMake build):
//   nvcc -arch=sm_90 -O3 tools/gpu/stage_floor.cu -o /tmp/stage_floor && /tmp/stage_floor
#include <cuda_runtime.h>

#include <cstdio>
#include <initializer_list>

namespace {

constexpr int kWidth = 2048, kStages = 60, kThreads = 512, kReplays = 200;

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

__device__ void stage(const float* in, float* out, int block, int blocks) {
  __shared__ float partial[kThreads / 32];
  float s = 0;
  for (int i = threadIdx.x; i < kWidth; i += blockDim.x) s += __ldcg(in + i);  // L2: another block wrote it
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  __syncthreads();
  const int per = (kWidth + blocks - 1) / blocks, end = min(kWidth, (block + 1) * per);
  for (int i = block * per + threadIdx.x; i < end; i += blockDim.x) out[i] = total * 1e-4f + i;
}

__global__ void chained_stage(const float* in, float* out, bool overlapped) {
  if (overlapped) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  stage(in, out, blockIdx.x, gridDim.x);
}

__device__ unsigned arrived, generation;

// Every block waits here until all have arrived; gen is the generation this block last saw.
__device__ void grid_barrier(unsigned& gen) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned next = gen + 1;
    if (atomicAdd(&arrived, 1) == gridDim.x - 1) {
      arrived = 0;
      __threadfence();
      atomicExch(&generation, next);
    } else {
      unsigned seen;
      do asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(seen) : "l"(&generation));
      while (seen != next);
    }
    gen = next;
  }
  __syncthreads();
}

__global__ void persistent_stages(float* vectors, unsigned first_generation) {
  unsigned gen = first_generation;
  for (int s = 0; s < kStages; ++s) {
    stage(vectors + s * kWidth, vectors + (s + 1) * kWidth, blockIdx.x, gridDim.x);
    grid_barrier(gen);
  }
}

// Microseconds per stage of kReplays runs of `run`, after 20 untimed ones.
template <class Run>
float us_per_stage(cudaStream_t stream, Run run) {
  for (int i = 0; i < 20; ++i) run();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, stream);
  for (int i = 0; i < kReplays; ++i) run();
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  return ms * 1000 / kReplays / kStages;
}

}  // namespace

int main() {
  int sms = 0;
  float* vectors = nullptr;
  cudaStream_t stream;
  if (!ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count") ||
      !ok(cudaMalloc(&vectors, sizeof(float) * kWidth * (kStages + 1)), "cudaMalloc") ||
      !ok(cudaMemset(vectors, 0, sizeof(float) * kWidth * (kStages + 1)), "cudaMemset") ||
      !ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream"))
    return 1;
  for (int blocks : {8, 64, sms, 2 * sms, 4 * sms}) {
    for (int overlapped = 0; overlapped < 2; ++overlapped) {
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      if (!ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture")) return 1;
      for (int s = 0; s < kStages; ++s) {
        cudaLaunchAttribute overlap{};
        overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        overlap.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t config{};
        config.gridDim = blocks;
        config.blockDim = kThreads;
        config.stream = stream;
        config.attrs = &overlap;
        config.numAttrs = overlapped;
        const float* in = vectors + s * kWidth;
        if (!ok(cudaLaunchKernelEx(&config, chained_stage, in, vectors + (s + 1) * kWidth, overlapped != 0), "launch"))
          return 1;
      }
      if (!ok(cudaStreamEndCapture(stream, &graph), "end capture") ||
          !ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate"))
        return 1;
      const float us = us_per_stage(stream, [&] { cudaGraphLaunch(exec, stream); });
      std::printf("chain pdl=%d  blocks=%4d: %.3f us per stage\n", overlapped, blocks, us);
    }
    if (blocks > sms) continue;  // the barrier needs every block resident: one per SM at most
    unsigned gen = 0;
    void* counter = nullptr;
    cudaGetSymbolAddress(&counter, generation);
    cudaMemset(counter, 0, sizeof(unsigned));
    cudaGetSymbolAddress(&counter, arrived);
    cudaMemset(counter, 0, sizeof(unsigned));
    const float us = us_per_stage(stream, [&] {
      persistent_stages<<<blocks, kThreads, 0, stream>>>(vectors, gen);
      gen += kStages;
    });
    std::printf("persistent   blocks=%4d: %.3f us per stage\n", blocks, us);
  }
  return ok(cudaStreamSynchronize(stream), "run") ? 0 : 1;
}
