// A planted fault, for the tests of the tests: step 1's kernel, except that its launch covers one
// element more than there is and that thread writes y[n], one past the end of the output.
// compute-sanitizer's memcheck must report it (tests/test_sanitize.py) and the fuzz tests' guard
// bands must see it (tests/test_fuzz.py): a clean verdict is worth only what a planted fault shows.
#include "common/elu.cuh"

__global__ void planted_oob_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float alpha) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = elu::Expf{}(x[i], alpha);
  if (i == n) y[i] = 0.0f;  // the fault
}

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  constexpr int threads = 256;
  planted_oob_kernel<<<elu::grid_blocks(elu::ceil_div(n + 1, threads)), threads, 0, stream>>>(x, y, n, alpha);
}
