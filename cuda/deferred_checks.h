#pragma once
// Checks of a kernel's input that the host reads later, at its next wait for the device.
//
// Some kernels validate what they read: index_select's indices, cross-entropy's class targets. A
// bad value is recorded in a small device buffer (and never used to read memory); the host turns
// it into the CPU's Error. Reading that buffer right after the kernel made every such call a
// synchronization, and a training step had two of them (the embedding at the start of the forward,
// the loss at its end): the host could not queue the backward while the GPU ran the forward.
//
// A deferred check instead copies the buffer, behind the kernel on the device's stream, into
// pinned host memory and returns. Every wait for the device (copy_to_host, synchronize: where the
// host would first see a value computed from the bad input) then reads the pending checks in the
// order they were queued and raises the first failure's Error. The error names the op and the bad
// value as before; it is raised by the wait rather than by the op's call.
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>

#include "tensor/error.h"

namespace linea::cuda {

// What a failed check says: given the values the kernel left in its buffer, an error message, or
// "" when they show nothing wrong.
using CheckVerdict = std::function<std::string(const int64_t* values)>;

// A verdict's message from parts, as linea::fail writes them.
template <class... Parts>
std::string check_message(const Parts&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  return os.str();
}

// Queues a check of `count` (at most kMaxCheckValues) int64 values at `flags` on `device`, written
// by kernels queued before on the device's stream. op names the Error's source. While the stream is
// being captured into a graph nothing is queued (a replay cannot report to the host; the kernels
// still refuse to read out of bounds).
constexpr int kMaxCheckValues = 2;
void defer_check(int device, const int64_t* flags, int count, const char* op, CheckVerdict verdict);

// Called after the host waited for `device`'s stream: raises the Error of the first pending check
// that failed; every pending check of the device is consumed either way.
void raise_failed_checks(int device);

}  // namespace linea::cuda
