#pragma once
// V neighbouring elements of T moved as one load or store: 16 bytes (kPack<T> elements) is the
// widest a thread can issue, and the row kernels that stream memory (refined_gate.cu,
// cross_entropy.cu) read and write their operands this way where the layout allows.
namespace linea::cuda {

template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// Elements of T in 16 bytes.
template <class T>
constexpr int kPack = 16 / sizeof(T);

template <class T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}
template <class T, int V>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, V>& x) {
  *reinterpret_cast<Pack<T, V>*>(p) = x;
}

}  // namespace linea::cuda
