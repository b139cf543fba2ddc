// Step 6 — beyond the roof: the experiments of notebook 08, one file.
//
// copy_ is not the physical floor: on the H200 a read-only and a write-only
// stream of the same bytes take less time together than copy_, which
// interleaves them. Each knob below changes one thing about how the traffic
// reaches the memory system; notebook 08 measures each one alone against a
// control, with DRAM counters. The defaults are the build that step 6 is.
//
//   -DELU6_THREADS=t   threads per block (128; step 2 has 256)
//   -DELU6_VECS=k      16-byte vectors per thread, all loaded before any store
//   -DELU6_LOAD=p      cache policy of the loads:  0 plain, 1 ld.global.cs
//   -DELU6_STORE=p     and of the stores:          (__ldcs/__stcs), 2 L2 evict_first,
//                      3 L2 evict_last (createpolicy + .L2::cache_hint),
//                      4 L1::no_allocate
//   -DELU6_ORDER=o     which tile a block takes: 0 in address order,
//                      1 reversed, 2 two streams (even blocks from the
//                      front half, odd ones from the back half), 3 a
//                      persistent grid (ELU6_BLOCKS_PER_SM x SMs blocks),
//                      each block one contiguous run of tiles
//   -DELU6_OP=Expf     the float32 formula (default Expm1Poly: expm1 without
//                      cancellation near 0, within 2 ulp of float64 for every
//                      input, at expf - 1's speed; Expf, steps 1-4's, returns 0
//                      for tiny negative inputs; Expm1f, PyTorch's, is bit for
//                      bit F.elu and costs its extra instructions: notebook 08)
//   -DELU6_OP16=Expf   the 16-bit formula (default Expm1f, PyTorch's: after
//                      rounding to 16 bits it is bit-identical to F.elu, and
//                      expf - 1 is not: notebook 08 counts the mismatches)
//
// With "binding = storage16" (below), elu() also takes float16 and bfloat16
// tensors: the same kernel moves 8 values per 16-byte vector, math in
// float32 and one rounding, as PyTorch does: half the bytes of float32.
// elu-study: binding = storage16
#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/elu.cuh"

#ifndef ELU6_THREADS
#define ELU6_THREADS 128
#endif
#ifndef ELU6_VECS
#define ELU6_VECS 1
#endif
#ifndef ELU6_LOAD
#define ELU6_LOAD 3
#endif
#ifndef ELU6_STORE
#define ELU6_STORE 0
#endif
#ifndef ELU6_ORDER
#define ELU6_ORDER 0
#endif
#ifndef ELU6_BLOCKS_PER_SM
#define ELU6_BLOCKS_PER_SM 16
#endif
#ifndef ELU6_OP
#define ELU6_OP Expm1Poly
#endif
#ifndef ELU6_OP16
#define ELU6_OP16 Expm1f
#endif

namespace step6 {

using Op = elu::ELU6_OP;
using Op16 = elu::ELU6_OP16;
constexpr int kThreads = ELU6_THREADS;
constexpr int kVecs = ELU6_VECS;
enum Policy { kPlain = 0, kStreaming = 1, kEvictFirst = 2, kEvictLast = 3, kNoAllocate = 4 };

template <int P>
__device__ __forceinline__ uint64_t l2_policy() {
  uint64_t policy;
  if constexpr (P == kEvictFirst) {
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  } else {
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  }
  return policy;
}

template <int P>
__device__ __forceinline__ uint4 load(const uint4* p) {
  static_assert(P >= kPlain && P <= kNoAllocate, "ELU6_LOAD: 0..4");
  uint4 v;
  if constexpr (P == kPlain) {
    v = *p;
  } else if constexpr (P == kStreaming) {
    v = __ldcs(p);
  } else if constexpr (P == kEvictFirst || P == kEvictLast) {
    asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(l2_policy<P>()));
  } else {
    asm("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  }
  return v;
}

template <int P>
__device__ __forceinline__ void store(uint4* p, uint4 v) {
  static_assert(P >= kPlain && P <= kNoAllocate, "ELU6_STORE: 0..4");
  if constexpr (P == kPlain) {
    *p = v;
  } else if constexpr (P == kStreaming) {
    __stcs(p, v);
  } else if constexpr (P == kEvictFirst || P == kEvictLast) {
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(l2_policy<P>()) : "memory");
  } else {
    asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  }
}

// One element type's view of a 16-byte vector: float32 holds 4 values, the
// 16-bit types 8 (math in float32, rounded to nearest even once).
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <class T>
using OpOf = std::conditional_t<std::is_same_v<T, float>, Op, Op16>;

template <class T>
__device__ __forceinline__ uint4 apply(uint4 v, float alpha) {
  constexpr int kPer = 16 / sizeof(T);
  T e[kPer];
  memcpy(e, &v, 16);
#pragma unroll
  for (int j = 0; j < kPer; ++j) e[j] = from_float<T>(OpOf<T>{}(to_float(e[j]), alpha));
  memcpy(&v, e, 16);
  return v;
}

// Which tile of kThreads * kVecs vectors block b takes (ELU6_ORDER 0-2).
__device__ __forceinline__ int64_t tile_of(int64_t b, int64_t tiles) {
#if ELU6_ORDER == 1
  return tiles - 1 - b;
#elif ELU6_ORDER == 2
  const int64_t half = (tiles + 1) / 2;
  return (b & 1) ? half + (b >> 1) : (b >> 1);
#else
  return b;
#endif
}

// A tile: lane j of a warp reads first + j, first + j + kThreads, ... so every
// warp access is 512 contiguous bytes; all loads are issued before any store.
template <class T>
__device__ __forceinline__ void do_tile(const uint4* __restrict__ x, uint4* __restrict__ y, int64_t n_vec,
                                        float alpha, int64_t tile) {
  const int64_t first = tile * (kThreads * kVecs) + threadIdx.x;
  uint4 v[kVecs];
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t i = first + int64_t(k) * kThreads;
    if (i < n_vec) v[k] = load<ELU6_LOAD>(x + i);
  }
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t i = first + int64_t(k) * kThreads;
    if (i < n_vec) store<ELU6_STORE>(y + i, apply<T>(v[k], alpha));
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
step6_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, int64_t n_vec, float alpha, int64_t tiles) {
#if ELU6_ORDER == 3
  const int64_t per = (tiles + gridDim.x - 1) / gridDim.x;
  const int64_t begin = int64_t(blockIdx.x) * per;
  const int64_t end = begin + per < tiles ? begin + per : tiles;
  for (int64_t t = begin; t < end; ++t) do_tile<T>(x, y, n_vec, alpha, t);
#else
  do_tile<T>(x, y, n_vec, alpha, tile_of(blockIdx.x, tiles));
#endif
}

// The scalar path of the 16-bit types: misaligned pointers and the n % 8 tail.
template <class T>
__global__ void scalar16_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, float alpha) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = from_float<T>(Op16{}(to_float(x[i]), alpha));
}

template <class T>
void launch_scalar16(const T* x, T* y, int64_t n, float alpha, cudaStream_t stream) {
  scalar16_kernel<T><<<elu::scalar_grid(n), elu::kScalarThreads, 0, stream>>>(x, y, n, alpha);
}

inline int sm_count() {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms;
}

// The vector part: n / (16 / sizeof(T)) whole vectors; the caller handles the rest.
template <class T>
void launch_vectors(const void* x, void* y, int64_t n, float alpha, cudaStream_t stream) {
  const int64_t n_vec = n / (16 / sizeof(T));
  if (n_vec == 0) return;
  const int64_t tiles = elu::ceil_div(n_vec, kThreads * kVecs);
  int64_t blocks = tiles;
#if ELU6_ORDER == 3
  const int64_t persistent = int64_t(ELU6_BLOCKS_PER_SM) * sm_count();
  blocks = tiles < persistent ? tiles : persistent;
#endif
  step6_kernel<T><<<elu::grid_blocks(blocks), kThreads, 0, stream>>>(
      static_cast<const uint4*>(x), static_cast<uint4*>(y), n_vec, alpha, tiles);
}

template <class T>
void launch16(const T* x, T* y, int64_t n, float alpha, cudaStream_t stream) {
  if (!elu::aligned16(x, y)) return launch_scalar16<T>(x, y, n, alpha, stream);
  const int64_t done = n & ~int64_t(7);
  if (done < n) launch_scalar16<T>(x + done, y + done, n - done, alpha, stream);
  launch_vectors<T>(x, y, done, alpha, stream);
}

}  // namespace step6

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  if (!elu::vector_path_or_fallback<step6::Op>(x, y, n, alpha, stream)) return;
  step6::launch_vectors<float>(x, y, n, alpha, stream);
}

void launch_elu_16(const void* x, void* y, int64_t n, float alpha, bool bf16, cudaStream_t stream) {
  if (bf16) {
    step6::launch16(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), n, alpha, stream);
  } else {
    step6::launch16(static_cast<const __half*>(x), static_cast<__half*>(y), n, alpha, stream);
  }
}
