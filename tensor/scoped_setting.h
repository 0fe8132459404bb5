#pragma once
// A setting changed for the life of a scope: the constructor keeps the value Get() reads and
// Set()s the new one, the destructor Set()s the kept value back, so scopes nest and an exception
// leaving the scope restores the setting too. Grad mode (NoGradGuard), the products' precision
// (nn::PrecisionScope) and a benchmark's thread count (bench::ThreadsForBench) are such settings.
namespace linea {

template <class T, T (*Get)(), void (*Set)(T)>
class ScopedSetting {
 public:
  explicit ScopedSetting(T value) : previous_(Get()) { Set(value); }
  ~ScopedSetting() { Set(previous_); }
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  T previous_;
};

}  // namespace linea
