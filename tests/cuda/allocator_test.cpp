// The caching allocator: freed blocks are reused, the counters are right, out of memory is an
// Error with the sizes, and the device stays usable after it.
#include <thread>

#include "tests/cuda/parity.h"

namespace linea {
namespace {

using testing::gpu;

TEST(CudaAllocator, RoundsSizesToBlockClasses) {
  LINEA_SKIP_WITHOUT_CUDA();
  EXPECT_EQ(cuda::allocation_size(0), 0u);
  EXPECT_EQ(cuda::allocation_size(1), 512u);
  EXPECT_EQ(cuda::allocation_size(512), 512u);
  EXPECT_EQ(cuda::allocation_size(513), 1024u);
  EXPECT_EQ(cuda::allocation_size(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(cuda::allocation_size((size_t(1) << 20) + 1), (size_t(1) << 20) + (size_t(1) << 17));
  for (size_t bytes = 1000; bytes < (size_t(1) << 34); bytes = bytes * 3 + 7) {
    const size_t block = cuda::allocation_size(bytes);
    EXPECT_GE(block, bytes);
    EXPECT_LE(block, bytes + bytes / 8 + 512) << bytes;  // at most 12.5% (or 512 B) wasted
  }
}

TEST(CudaAllocator, ReusesAFreedBlockAndCountsIt) {
  LINEA_SKIP_WITHOUT_CUDA();
  cuda::empty_cache(0);  // no block of this size left over from other tests
  const size_t bytes = 3 * 1000 * 1000 + 17;
  const size_t block = cuda::allocation_size(bytes);
  const cuda::MemoryStats before = cuda::memory_stats(0);

  void* first = cuda::allocate(bytes, 0);
  const cuda::MemoryStats held = cuda::memory_stats(0);
  EXPECT_EQ(held.in_use, before.in_use + block);
  EXPECT_GE(held.peak, held.in_use);
  EXPECT_EQ(held.allocations, before.allocations + 1);

  cuda::release(first, bytes, 0);
  const cuda::MemoryStats freed = cuda::memory_stats(0);
  EXPECT_EQ(freed.in_use, before.in_use);
  EXPECT_GE(freed.cached, block);
  EXPECT_EQ(freed.peak, held.peak);  // the peak remembers

  void* second = cuda::allocate(bytes, 0);
  EXPECT_EQ(second, first) << "the freed block should have been reused";
  const cuda::MemoryStats again = cuda::memory_stats(0);
  EXPECT_EQ(again.device_mallocs, freed.device_mallocs) << "reuse must not call cudaMalloc";
  EXPECT_EQ(again.in_use, before.in_use + block);
  EXPECT_EQ(again.cached, freed.cached - block);
  EXPECT_EQ(again.reserved, again.in_use + again.cached);
  cuda::release(second, bytes, 0);
}

TEST(CudaAllocator, PeakTracksTheHighestUseUntilReset) {
  LINEA_SKIP_WITHOUT_CUDA();
  cuda::empty_cache(0);  // a cached block up to 25% larger would serve these requests instead
  cuda::reset_peak(0);
  const size_t base = cuda::memory_stats(0).in_use;
  EXPECT_EQ(cuda::memory_stats(0).peak, base);
  {
    const Tensor a = empty({1 << 20}, kFloat32, gpu());  // 4 MiB each
    const Tensor b = empty({1 << 20}, kFloat32, gpu());
    EXPECT_EQ(cuda::memory_stats(0).in_use, base + 2 * cuda::allocation_size(4 << 20));
  }
  // The tensors' storage went back to the allocator when they were destroyed.
  EXPECT_EQ(cuda::memory_stats(0).in_use, base);
  EXPECT_EQ(cuda::memory_stats(0).peak, base + 2 * cuda::allocation_size(4 << 20));
  cuda::reset_peak(0);
  EXPECT_EQ(cuda::memory_stats(0).peak, base);
}

// requested counts what was asked for, rounded up to 512 B only, whatever block serves it.
TEST(CudaAllocator, RequestedCountsTheRequestsNotTheBlocks) {
  LINEA_SKIP_WITHOUT_CUDA();
  cuda::reset_peak(0);
  const size_t base = cuda::memory_stats(0).requested;
  EXPECT_EQ(cuda::memory_stats(0).peak_requested, base);
  {
    const Tensor a = empty({(3 << 20) + 7}, kFloat32, gpu());  // 12 MiB + 28 B: a larger block
    const Tensor b = empty({100}, kFloat32, gpu());           // 400 B
    const size_t asked = (size_t{12} << 20) + 512 + 512;
    EXPECT_GT(cuda::allocation_size((size_t{12} << 20) + 28), (size_t{12} << 20) + 512);
    EXPECT_EQ(cuda::memory_stats(0).requested, base + asked);
    EXPECT_EQ(cuda::memory_stats(0).peak_requested, base + asked);
  }
  EXPECT_EQ(cuda::memory_stats(0).requested, base);
  EXPECT_EQ(cuda::memory_stats(0).peak_requested, base + (size_t{12} << 20) + 1024);
  cuda::reset_peak(0);
  EXPECT_EQ(cuda::memory_stats(0).peak_requested, base);
}

TEST(CudaAllocator, EmptyCacheReturnsCachedBlocks) {
  LINEA_SKIP_WITHOUT_CUDA();
  { const Tensor t = zeros({12345}, {kFloat64, gpu()}); }
  EXPECT_GT(cuda::memory_stats(0).cached, 0u);
  cuda::empty_cache(0);
  const cuda::MemoryStats s = cuda::memory_stats(0);
  EXPECT_EQ(s.cached, 0u);
  EXPECT_EQ(s.reserved, s.in_use);
}

TEST(CudaAllocator, OutOfMemoryIsAnErrorWithTheSizes) {
  LINEA_SKIP_WITHOUT_CUDA();
  const size_t petabyte = size_t(1) << 50;
  EXPECT_LINEA_ERROR(cuda::allocate(petabyte, 0), "out of GPU memory on cuda:0", "asked for 1125899906842624 bytes",
                     "in use", "cached", "free");
  // Through a tensor, and the device still works afterwards.
  EXPECT_LINEA_ERROR(empty({int64_t(1) << 48}, kFloat32, gpu()), "out of GPU memory");
  const Tensor t = full({1000}, 2.0, {kFloat32, gpu()});
  EXPECT_EQ(sum(t).item(), 2000.0);
}

TEST(CudaAllocator, UnknownDeviceIsAnError) {
  LINEA_SKIP_WITHOUT_CUDA();
  EXPECT_LINEA_ERROR(cuda::allocate(16, 999), "cuda:999", "does not exist");
  EXPECT_LINEA_ERROR(empty({4}, kFloat32, Device::cuda(999)), "does not exist");
}

TEST(CudaAllocator, ThreadsAllocatingAtOnceLeaveTheCountsBalanced) {
  LINEA_SKIP_WITHOUT_CUDA();
  const size_t base = cuda::memory_stats(0).in_use;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        void* p = cuda::allocate(static_cast<size_t>(1000 * (t + 1) + i), 0);
        cuda::release(p, 0, 0);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(cuda::memory_stats(0).in_use, base);
}

TEST(CudaAllocator, CopiesRoundTripThroughTheStream) {
  LINEA_SKIP_WITHOUT_CUDA();
  std::vector<double> values(100003);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) * 0.5 - 7.0;
  const Tensor host = from_vector(values, {static_cast<int64_t>(values.size())});
  const Tensor device = testing::on_gpu(host);
  EXPECT_TRUE(device.device().is_cuda());
  EXPECT_EQ(device.to_vector<double>(), values);
  cuda::synchronize(0);
}

}  // namespace
}  // namespace linea
