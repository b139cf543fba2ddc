// The 16-bit storage types' conversions, shared by the kernel files with a 16-bit path (step 7, the CUB
// peer): one value, or two packed in a 32-bit word, to and from float32, rounded to nearest even as PyTorch
// rounds. Each type's intrinsics are named once, in Convert<T>; Pair<T> and the scalar functions use them.
#pragma once
#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace elu {

template <class T> struct Convert;
template <> struct Convert<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  static __device__ __forceinline__ float one(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 back(float v) { return __float2bfloat16_rn(v); }
  static __device__ __forceinline__ float2 two(T2 v) { return __bfloat1622float2(v); }
  static __device__ __forceinline__ T2 back2(float a, float b) { return __floats2bfloat162_rn(a, b); }
};
template <> struct Convert<__half> {
  using T2 = __half2;
  static __device__ __forceinline__ float one(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half back(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ float2 two(T2 v) { return __half22float2(v); }
  static __device__ __forceinline__ T2 back2(float a, float b) { return __floats2half2_rn(a, b); }
};

// Two 16-bit values in a 32-bit word <-> two floats, one instruction each way.
template <class T> struct Pair {
  using T2 = typename Convert<T>::T2;
  static __device__ __forceinline__ float2 unpack(uint32_t w) {
    T2 v;
    memcpy(&v, &w, 4);
    return Convert<T>::two(v);
  }
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    const T2 v = Convert<T>::back2(a, b);
    uint32_t w;
    memcpy(&w, &v, 4);
    return w;
  }
};

template <class T> __device__ __forceinline__ float to_float(T v) { return Convert<T>::one(v); }
template <class T> __device__ __forceinline__ T from_float(float v) { return Convert<T>::back(v); }

}  // namespace elu
