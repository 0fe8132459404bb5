#pragma once
// A small persistent thread pool for CPU kernels. parallel_for splits [0, n) into one contiguous
// range per thread when there is enough work (n >= 2 * grain), else runs inline. Calls made from
// inside a worker run inline, so kernels may nest without oversubscribing the cores.
#include <cstdint>
#include <functional>

namespace linea::cpu {

// Threads used by kernels: LINEA_NUM_THREADS if set, else the hardware's count.
int num_threads();
void set_num_threads(int n);

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

// Work below this many elements is not worth waking another thread for.
inline constexpr int64_t kElementwiseGrain = 32768;

}  // namespace linea::cpu
