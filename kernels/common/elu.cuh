// Device code shared by every step: the ELU formula, float4 helpers, the
// scalar path that handles tails and misaligned pointers, and the contract
// each step's launcher fulfils for common/binding.cpp.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>

// Every step defines this; binding.cpp validates tensors and calls it on the
// current PyTorch stream. x and y hold n contiguous floats (n > 0).
void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream);

namespace elu {

// ELU(x) = x for x > 0, alpha * (exp(x) - 1) otherwise. Written as "x > 0 ?"
// so that NaN takes the exp branch and stays NaN, and -inf gives -alpha.
struct Expf {  // the seed's formula: libdevice expf (2 ulp), then subtract 1
  __device__ __forceinline__ float operator()(float x, float alpha) const {
    return x > 0.0f ? x : alpha * (expf(x) - 1.0f);
  }
};
struct FastExpf {  // __expf: one MUFU.EX2 after a multiply by log2(e)
  __device__ __forceinline__ float operator()(float x, float alpha) const {
    return x > 0.0f ? x : alpha * (__expf(x) - 1.0f);
  }
};
struct Expm1f {  // what PyTorch uses: no cancellation near 0
  __device__ __forceinline__ float operator()(float x, float alpha) const {
    return x > 0.0f ? x : alpha * expm1f(x);
  }
};
// expm1 without cancellation and without expm1f's cost: for -1 < x <= 0, x + x^2 R(x), with R a degree-5
// polynomial in Horner form fitted (minimax, relative to expm1) to (expm1(x) - x) / x^2 on [-1, 0]: its own error
// is below 3e-9 relative there, and the leading x is exact, so tiny inputs come back as themselves; below -1,
// where e^x <= 0.37 and subtracting 1 loses nothing, __expf(x) - 1 (one MUFU.EX2). Both are computed and one is
// selected: no divergence. Six FMAs where the Taylor series to x^11 (Expm1Taylor, the first version) takes ten.
//
// Below -1, e^x comes from ex2.approx.ftz (kFtz, the default) rather than __expf, which spends a compare and two
// multiplies per element keeping a result under 2^-126 (x below about -87.3) subnormal. The value is __expf's bit
// for bit wherever it can matter: a result under 2^-126 comes back as 0, and e - 1 rounds to -1 either way (e under
// 2^-25 does); an argument under 2^-126 (|x| under 2^-126) is flushed, but such an x takes the polynomial. -inf
// (rescaled before, 0 either way) gives -1; NaN, not rescaled, meets the same instruction. This rests on ex2.approx
// and ex2.approx.ftz lowering to one MUFU.EX2 (nvcc 13.0, sm_75 to sm_120). Expm1PolyExpf keeps __expf (one change).
__device__ __forceinline__ float exp_ftz(float x) {
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * 0x1.715476p+0f));  // log2(e) as __expf rounds it
  return e;
}
template <bool kFtz>
struct Expm1PolyWith {
  __device__ __forceinline__ float operator()(float x, float alpha) const {
    float r = 1.29130902e-4f;
    r = fmaf(r, x, 1.30112644e-3f);
    r = fmaf(r, x, 8.27620830e-3f);
    r = fmaf(r, x, 4.16474678e-2f);
    r = fmaf(r, x, 1.66663662e-1f);
    r = fmaf(r, x, 4.99999851e-1f);
    // x + x^2 r has x's sign on (-1, 0]; copysignf keeps it at -0.0 too, where x^2 r + x rounds to +0.0.
    const float near = copysignf(fmaf(x * x, r, x), x);
    const float far = (kFtz ? exp_ftz(x) : __expf(x)) - 1.0f;
    return x > 0.0f ? x : alpha * (x > -1.0f ? near : far);
  }
};
using Expm1Poly = Expm1PolyWith<true>;
using Expm1PolyExpf = Expm1PolyWith<false>;
// The first Expm1Poly: the same split, the Taylor series to x^11 above -1 (ten FMAs): the round-4 control.
struct Expm1Taylor {
  __device__ __forceinline__ float operator()(float x, float alpha) const {
    float r = 2.50521084e-8f;        // 1/11!
    r = fmaf(r, x, 2.75573192e-7f);  // 1/10!
    r = fmaf(r, x, 2.75573192e-6f);  // 1/9!
    r = fmaf(r, x, 2.48015873e-5f);  // 1/8!
    r = fmaf(r, x, 1.98412698e-4f);  // 1/7!
    r = fmaf(r, x, 1.38888889e-3f);  // 1/6!
    r = fmaf(r, x, 8.33333333e-3f);  // 1/5!
    r = fmaf(r, x, 4.16666667e-2f);  // 1/4!
    r = fmaf(r, x, 1.66666667e-1f);  // 1/3!
    r = fmaf(r, x, 0.5f);            // 1/2!
    const float near = copysignf(fmaf(x * x, r, x), x);
    const float far = __expf(x) - 1.0f;
    return x > 0.0f ? x : alpha * (x > -1.0f ? near : far);
  }
};
struct Copy {  // not ELU: no math at all, so a kernel built with it moves the bytes and nothing else
  __device__ __forceinline__ float operator()(float x, float) const { return x; }
};

template <class Op>
__device__ __forceinline__ float4 apply4(float4 v, float alpha, Op op) {
  return make_float4(op(v.x, alpha), op(v.y, alpha), op(v.z, alpha), op(v.w, alpha));
}

// float4 access needs both pointers on 16-byte boundaries; a view such as
// x.view(-1)[1:] is not, and must not be read as float4.
inline bool aligned16(const void* x, const void* y) {
  return (reinterpret_cast<uintptr_t>(x) % 16 == 0) && (reinterpret_cast<uintptr_t>(y) % 16 == 0);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A CUDA runtime call that must succeed before a launch: its error, cleared so that a later launch check
// does not see it again, becomes a C++ exception (a Python RuntimeError through the binding).
inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error(std::string("elu: ") + what + " failed: " + cudaGetErrorString(err));
  }
}

// gridDim.x is limited to 2^31 - 1; indices inside kernels are 64-bit.
inline unsigned int grid_blocks(int64_t blocks) {
  if (blocks > 0x7fffffffLL) {
    throw std::length_error("elu: tensor too large for a 1-D grid (" + std::to_string(blocks) + " blocks)");
  }
  return static_cast<unsigned int>(blocks);
}

// The scalar kernels' launch: 256 threads, one element each, at most 65536 blocks (a grid-stride loop does
// the rest).
constexpr int kScalarThreads = 256;
inline unsigned int scalar_grid(int64_t n) {
  const int64_t blocks = ceil_div(n, kScalarThreads);
  return grid_blocks(blocks < 65536 ? blocks : 65536);
}

template <class Op>
__global__ void scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float alpha) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = Op{}(x[i], alpha);
}

// The scalar path: for pointers float4 cannot touch (correct at any alignment,
// not fast) and for the n % 4 elements after a float4 kernel's last vector.
template <class Op>
void launch_scalar(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  scalar_kernel<Op><<<scalar_grid(n), kScalarThreads, 0, stream>>>(x, y, n, alpha);
}

// A float4 launcher's entry and exit: misaligned pointers go to the scalar
// path (returns false), and the last n % 4 elements get their own small launch.
template <class Op>
bool vector_path_or_fallback(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  if (!aligned16(x, y)) {
    launch_scalar<Op>(x, y, n, alpha, stream);
    return false;
  }
  const int64_t done = n & ~int64_t(3);
  if (done < n) launch_scalar<Op>(x + done, y + done, n - done, alpha, stream);
  return done > 0;
}

}  // namespace elu
