// The ELU backward pass, shared by every build: elu_study.build appends this file to each
// variant's CUDA source (a user's own .cu file included), and common/binding.cpp exposes it as
// module.elu_backward(grad_output, x_or_result, alpha, is_result=False, out=None).
//
// grad_in = grad * dELU/dx, written as PyTorch writes it (aten elu_backward, scale = input_scale = 1):
//   from the input x:         x <= 0 ? grad * alpha * exp(x) : grad
//   from the result y (y = ELU(x), alpha >= 0, as in-place elu_ saves it):
//                             y <= 0 ? grad * (y + alpha) : grad        (y + alpha = alpha * exp(x))
// "x <= 0 ?" as PyTorch has it: a NaN input takes the grad branch in both.
//
// The same rules as the forward steps (common/elu.cuh): float4 on 16-byte-aligned pointers,
// a scalar kernel for misaligned ones and for the n % 4 tail, 64-bit indices, grids checked.
// Three streams (grad, x, out) instead of two: its roof is 1.5x the forward's time.
// Everything is in namespace elu::bwd, so nothing collides with a step file's own globals, and
// the SASS report (elu_study.sass) counts these kernels as shared helpers, not the step's kernel.
//
// Two knobs, for the study's one-change attempts at the float32 backward's roof (its defaults are the
// measured build): -DELU_BWD_THREADS=t (threads per block of the float4 kernel, 256) and
// -DELU_BWD_LOAD=p (3, the default: loads of grad and x with an L2 evict_last policy, as step 6 loads;
// 0: plain loads), and -DELU_BWD_SELECT=s (1, the default: every lane computes exp(x), then selects, an empty asm
// keeping nvcc from moving exp back into a branch; 0: exp only where x <= 0, a branch per element that a warp of
// mixed signs runs both sides of). Builds whose flags flush denormals (--use_fast_math, -ftz=true) keep their own
// form: the build defines ELU_FLUSHES_DENORMALS for them.
#include "common/elu.cuh"

#ifndef ELU_BWD_THREADS
#define ELU_BWD_THREADS 256
#endif
#ifndef ELU_BWD_LOAD
#define ELU_BWD_LOAD 3
#endif
#ifndef ELU_BWD_SELECT
#define ELU_BWD_SELECT 1
#endif
#ifndef ELU_FLUSHES_DENORMALS
#define ELU_FLUSHES_DENORMALS 0
#endif
static_assert(ELU_BWD_LOAD == 0 || ELU_BWD_LOAD == 3, "ELU_BWD_LOAD: 0 (plain) or 3 (L2 evict_last)");

namespace elu {
namespace bwd {

__device__ __forceinline__ float4 load4(const float* p, int64_t i) {
#if ELU_BWD_LOAD == 3
  float4 v;
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm("ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(reinterpret_cast<const float4*>(p) + i), "l"(policy));
  return v;
#else
  return reinterpret_cast<const float4*>(p)[i];
#endif
}

// "v <= 0", read from the bits. A build with --use_fast_math (step 4) flushes denormals to zero in
// float comparisons, which would send a positive denormal x down the exp branch (grad * alpha instead
// of grad); the bits do not flush. NaN of either sign is not <= 0, as in PyTorch.
__device__ __forceinline__ bool not_positive(float v) {
  const int bits = __float_as_int(v);
  return bits <= 0 && (bits & 0x7fffffff) <= 0x7f800000;
}

struct FromInput {
  __device__ __forceinline__ float operator()(float g, float x, float alpha) const {
#if ELU_FLUSHES_DENORMALS
    // Flushed denormals again: exp(x) is denormal for x in [-103.97, -87.3], and a flushed exp(x) times a
    // huge grad (3e38, inf) loses a result near 1 (NaN). exp(x/2), applied twice, stays normal down to x = -174.
    // Below kExpZero exp(x) is under 2^-150, which rounds to 0 in aten's expf: 0 here too (inf * 0 is NaN there).
    // nvcc defines no macro for --use_fast_math: the build (elu_study.core.build) defines this one.
    constexpr float kExpZero = -103.97207641601562f;  // float32 nearest ln(2^-150), the least whose exp rounds up
    const float e = x < kExpZero ? 0.0f : expf(0.5f * x);
    return not_positive(x) ? (g * alpha * e) * e : g;
#elif ELU_BWD_SELECT == 1
    float e = expf(x);
    asm volatile("" : "+f"(e));  // computed on every lane, so nvcc cannot move it into a branch
    return not_positive(x) ? g * alpha * e : g;
#else
    return not_positive(x) ? g * alpha * expf(x) : g;
#endif
  }
};
struct FromResult {
  __device__ __forceinline__ float operator()(float g, float y, float alpha) const {
    return not_positive(y) ? g * (y + alpha) : g;
  }
};

template <class Op>
__global__ void scalar_kernel(const float* __restrict__ g, const float* __restrict__ x, float* __restrict__ out,
                              int64_t n, float alpha) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = Op{}(g[i], x[i], alpha);
}

template <class Op>
__global__ void float4_kernel(const float* __restrict__ g, const float* __restrict__ x, float* __restrict__ out,
                              int64_t n, float alpha) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n / 4) {
    const float4 gv = load4(g, i);
    const float4 xv = load4(x, i);
    const Op op{};
    reinterpret_cast<float4*>(out)[i] =
        make_float4(op(gv.x, xv.x, alpha), op(gv.y, xv.y, alpha), op(gv.z, xv.z, alpha), op(gv.w, xv.w, alpha));
  }
}

template <class Op>
void launch_scalar(const float* g, const float* x, float* out, int64_t n, float alpha, cudaStream_t stream) {
  scalar_kernel<Op><<<scalar_grid(n), kScalarThreads, 0, stream>>>(g, x, out, n, alpha);
}

template <class Op>
void launch(const float* g, const float* x, float* out, int64_t n, float alpha, cudaStream_t stream) {
  if (!aligned16(g, x) || !aligned16(out, out)) {  // any of the three misaligned: the scalar path
    launch_scalar<Op>(g, x, out, n, alpha, stream);
    return;
  }
  const int64_t done = n & ~int64_t(3);
  if (done < n) launch_scalar<Op>(g + done, x + done, out + done, n - done, alpha, stream);
  if (done == 0) return;
  constexpr int threads = ELU_BWD_THREADS;
  float4_kernel<Op><<<grid_blocks(ceil_div(n / 4, threads)), threads, 0, stream>>>(g, x, out, n, alpha);
}

}  // namespace bwd
}  // namespace elu

// g, x_or_y and out hold n contiguous floats (n > 0); out may be exactly g or x_or_y.
void launch_elu_backward(const float* g, const float* x_or_y, float* out, int64_t n, float alpha, bool is_result,
                         cudaStream_t stream) {
  if (is_result) {
    elu::bwd::launch<elu::bwd::FromResult>(g, x_or_y, out, n, alpha, stream);
  } else {
    elu::bwd::launch<elu::bwd::FromInput>(g, x_or_y, out, n, alpha, stream);
  }
}
