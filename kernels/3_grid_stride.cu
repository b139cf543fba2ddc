// Step 3 — grid-stride: the seed's final launch, 1152 blocks x 512 threads,
// each thread looping over float4s a whole grid apart.
//
// 512-thread blocks fit at most 4 per SM (2048 threads), so on 132 SMs one
// wave is 528 blocks and 1152 blocks are 2.18 waves. Every block carries the
// same share of the work, so the last 96 blocks run after the first two waves
// with the GPU a fifth full.
//
// Ablations, one change each (notebook 03):
//   -DELU_GRID_WAVES=k    the grid is k whole waves of the GPU at hand
//                         (k x SMs x resident blocks per SM, from the
//                         occupancy API); k = -1: one vector per thread, no
//                         loop at all (the one-shot grid of step 2)
//   -DELU_GRID_THREADS=t  t threads per block instead of 512
//   -DELU_GRID_UNROLL=1   forbid unrolling: nvcc unrolls the loop by two by
//                         default, so each thread has two loads in flight
#include "common/elu.cuh"

#ifndef ELU_GRID_WAVES
#define ELU_GRID_WAVES 0  // 0: the seed's fixed 1152 blocks
#endif
#ifndef ELU_GRID_THREADS
#define ELU_GRID_THREADS 512
#endif
#ifndef ELU_GRID_UNROLL
#define ELU_GRID_UNROLL 0  // 0: the compiler's choice
#endif
constexpr int kSeedBlocks = 1152;
constexpr int kThreads = ELU_GRID_THREADS;

__global__ void elu_grid_stride_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float alpha) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t n_vec = n / 4;
#if ELU_GRID_UNROLL == 1
#pragma unroll 1
#endif
  for (int64_t i = tid; i < n_vec; i += stride) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    reinterpret_cast<float4*>(y)[i] = elu::apply4(v, alpha, elu::Expf{});
  }
}

static int64_t blocks_per_wave() {
  int device = 0, sms = 0, per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, elu_grid_stride_kernel, kThreads, 0);
  return int64_t(sms) * per_sm;
}

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  if (!elu::vector_path_or_fallback<elu::Expf>(x, y, n, alpha, stream)) return;
  const int64_t needed = elu::ceil_div(n / 4, kThreads);  // one vector per thread; no idle blocks on small inputs
  int64_t wanted = kSeedBlocks;
  if (ELU_GRID_WAVES > 0) wanted = ELU_GRID_WAVES * blocks_per_wave();
  if (ELU_GRID_WAVES < 0) wanted = needed;
  const int64_t blocks = needed < wanted ? needed : wanted;
  elu_grid_stride_kernel<<<elu::grid_blocks(blocks), kThreads, 0, stream>>>(x, y, n, alpha);
}
