// Step 1 — naive scalar: one thread per element, 256 threads per block, expf.
// Each thread moves 4 bytes in and 4 out: correct, but far from the bandwidth roof.
#include "common/elu.cuh"

__global__ void elu_naive_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float alpha) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // 64-bit: n may exceed 2^31
  if (i < n) y[i] = elu::Expf{}(x[i], alpha);
}

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  constexpr int threads = 256;
  elu_naive_kernel<<<elu::grid_blocks(elu::ceil_div(n, threads)), threads, 0, stream>>>(x, y, n, alpha);
}
