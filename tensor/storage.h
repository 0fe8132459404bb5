#pragma once
// Storage is a block of device memory that any number of views share. It also carries the version
// counter: every in-place write to any view bumps it, so autograd can tell that a tensor it saved
// for backward was modified in the meantime (all views of one storage share one counter).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/device.h"

namespace linea {

class Storage {
 public:
  // Allocates nbytes on the device, uninitialised.
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace linea
