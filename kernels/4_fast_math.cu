// elu-study: nvcc-flags = --use_fast_math
// Step 4 — fast-math: step 2's kernel with the hardware exponential, __expf
// (a multiply by log2(e) and one MUFU.EX2), built with --use_fast_math as the
// seed does (which also flushes denormals to zero). Once a kernel is
// memory-bound the ALU time saved hides under the memory time; the accuracy
// lost does not hide.
#include "common/elu.cuh"

__global__ void elu_fast_math_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float alpha) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_vec = n / 4;
  if (i < n_vec) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    reinterpret_cast<float4*>(y)[i] = elu::apply4(v, alpha, elu::FastExpf{});
  }
}

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  if (!elu::vector_path_or_fallback<elu::FastExpf>(x, y, n, alpha, stream)) return;
  constexpr int threads = 256;
  const int64_t blocks = elu::ceil_div(n / 4, threads);
  elu_fast_math_kernel<<<elu::grid_blocks(blocks), threads, 0, stream>>>(x, y, n, alpha);
}
