// CUDA graph capture and replay (cuda/graph.h).
#include "cuda/graph.h"

#include <cuda_runtime.h>

#include <exception>
#include <string>

#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/stream.h"

namespace linea::cuda {

namespace {

class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(int device, int pool, cudaGraph_t graph, cudaGraphExec_t exec)
      : device_(device), pool_(pool), graph_(graph), exec_(exec) {}
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph() override {
    // The blocks may only go back to the cache once no replay can still write them.
    cudaStreamSynchronize(stream_for(device_));
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
    cudaGetLastError();
    CachingAllocator::instance().retire_pool(device_, pool_);
  }

  size_t node_count() const override {
    size_t count = 0;
    LINEA_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &count), "cuda.graph", "counting the nodes");
    return count;
  }

  void replay() const override {
    const cudaStream_t stream = use_device(device_);
    LINEA_CUDA_CHECK(cudaGraphLaunch(exec_, stream), "cuda.graph", "replay on cuda:", device_);
  }

 private:
  int device_;
  int pool_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
};

}  // namespace

std::unique_ptr<DeviceGraph> capture_graph(int device, const std::function<void()>& work) {
  const cudaStream_t stream = use_device(device);
  CachingAllocator& allocator = CachingAllocator::instance();
  const int pool = allocator.open_pool(device);
  LINEA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cuda.graph",
                   "begin capture on cuda:", device);
  std::exception_ptr failure;
  try {
    work();
  } catch (...) {
    failure = std::current_exception();
  }
  // The capture must end whatever happened, or the stream stays unusable.
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  cudaGetLastError();
  allocator.close_pool(device);
  auto give_up = [&] {
    if (graph != nullptr) cudaGraphDestroy(graph);
    allocator.retire_pool(device, pool);
  };
  if (failure) {
    give_up();
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      fail("cuda.graph", "the work could not be captured on cuda:", device, ": ", e.what());
    }
  }
  if (ended != cudaSuccess) {
    give_up();
    fail("cuda.graph", "the capture on cuda:", device, " was invalidated (", cudaGetErrorString(ended),
         "): the work did something a graph cannot hold, such as a copy to or from the host");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  if (instantiated != cudaSuccess) {
    cudaGetLastError();
    give_up();
    fail("cuda.graph", "cudaGraphInstantiate failed on cuda:", device, ": ", cudaGetErrorString(instantiated));
  }
  return std::make_unique<CudaGraph>(device, pool, graph, exec);
}

}  // namespace linea::cuda
