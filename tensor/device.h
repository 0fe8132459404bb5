#pragma once
// A device is (kind, index) from the start, so that several GPUs of one host need no new concept.
#include <cstdint>
#include <string>

namespace linea {

enum class DeviceKind : uint8_t { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceKind::CUDA, index}; }
  // Parses "cpu", "cuda", "cuda:1"; throws linea::Error on anything else.
  static Device parse(const std::string& text);

  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  bool operator==(const Device&) const = default;
};

inline const Device kCPU = Device::cpu();

}  // namespace linea
