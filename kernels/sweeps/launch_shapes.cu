// Launch-shape sweep: step 2's kernel (elu::Expf, float4, all loads before any
// store) built for every launch shape the sweep times, in one build, the shape
// chosen at run time with module.set_launch_shape(threads, vectors, hints,
// blocks_per_sm=0); module.launch_shapes() lists the instances.
//
// One-shot (blocks_per_sm = 0), like steps 2 and 5: every thread handles
// `vectors` float4s once. A block covers threads * vectors consecutive float4s;
// lane j of a warp reads first + j, first + j + threads, ... (coalesced), and
// issues every load before its first store. hints: __ldcs / __stcs
// (evict-first) instead of plain loads and stores. threads {64, 128, 256, 512,
// 1024} x vectors {1, 2, 4, 8} x hints {no, yes}: 40 instances. 256 x 1 without
// hints is step 2, instruction for instruction (bit-identical results).
//
// Grid-stride (blocks_per_sm > 0), like step 3: blocks_per_sm x SMs blocks (SM
// count of the current device, read at each launch; never more blocks than one
// vector per thread needs), each thread looping over float4s a grid apart, one
// float4 per iteration in the source (nvcc may unroll it, as in step 3's
// default build). threads {128, 256, 512, 1024}; one vector, no hints.
//
// The selected shape is process-global host state (not per module call, not per
// thread): set_launch_shape affects every later elu() call in the process until
// the next set_launch_shape. The default is step 2's: 256 x 1, no hints, one-shot.
// Tails, misaligned pointers and > 2^31 elements as in every step:
// elu::vector_path_or_fallback, 64-bit indices, elu::grid_blocks.
// elu-study: binding = launch-shape
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/elu.cuh"

using Op = elu::Expf;  // step 2's formula, so every cell is comparable with (and bit-identical to) step 2

template <bool Hints>
__device__ __forceinline__ float4 load(const float4* p) {
  if constexpr (Hints) return __ldcs(p);
  else return *p;
}
template <bool Hints>
__device__ __forceinline__ void store(float4* p, float4 v) {
  if constexpr (Hints) __stcs(p, v);
  else *p = v;
}

template <int Threads, int Vectors, bool Hints>
__global__ void __launch_bounds__(Threads)
elu_one_shot_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float alpha) {
  const int64_t n_vec = n / 4;
  const int64_t first = int64_t(blockIdx.x) * Threads * Vectors + threadIdx.x;
  const float4* xv = reinterpret_cast<const float4*>(x);
  float4* yv = reinterpret_cast<float4*>(y);
  float4 v[Vectors];
#pragma unroll
  for (int k = 0; k < Vectors; ++k) {
    const int64_t i = first + int64_t(k) * Threads;
    if (i < n_vec) v[k] = load<Hints>(xv + i);
  }
#pragma unroll
  for (int k = 0; k < Vectors; ++k) {
    const int64_t i = first + int64_t(k) * Threads;
    if (i < n_vec) store<Hints>(yv + i, elu::apply4(v[k], alpha, Op{}));
  }
}

template <int Threads>
__global__ void __launch_bounds__(Threads)
elu_grid_stride_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float alpha) {
  const int64_t tid = int64_t(blockIdx.x) * Threads + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * Threads;
  const int64_t n_vec = n / 4;
  for (int64_t i = tid; i < n_vec; i += stride) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    reinterpret_cast<float4*>(y)[i] = elu::apply4(v, alpha, Op{});
  }
}

namespace {

// x, y: 16-byte aligned; n_vec = n / 4 > 0 float4s to do.
using Launcher = void (*)(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream, int64_t blocks_per_sm);

template <int Threads, int Vectors, bool Hints>
void launch_one_shot(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream, int64_t) {
  const int64_t blocks = elu::ceil_div(n / 4, int64_t(Threads) * Vectors);
  elu_one_shot_kernel<Threads, Vectors, Hints><<<elu::grid_blocks(blocks), Threads, 0, stream>>>(x, y, n, alpha);
}

template <int Threads>
void launch_grid_stride(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream, int64_t blocks_per_sm) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int64_t needed = elu::ceil_div(n / 4, Threads);  // one vector per thread: no idle blocks on small inputs
  const int64_t wanted = blocks_per_sm * sms;
  const int64_t blocks = needed < wanted ? needed : wanted;
  elu_grid_stride_kernel<Threads><<<elu::grid_blocks(blocks), Threads, 0, stream>>>(x, y, n, alpha);
}

struct Shape {
  int threads;
  int vectors;
  bool hints;
  bool grid_stride;  // true: needs blocks_per_sm > 0; false: blocks_per_sm == 0
  Launcher launch;
};

#define ELU_ONE_SHOT_HV(T, V) \
  Shape{T, V, false, false, &launch_one_shot<T, V, false>}, Shape{T, V, true, false, &launch_one_shot<T, V, true>}
#define ELU_ONE_SHOT_T(T) ELU_ONE_SHOT_HV(T, 1), ELU_ONE_SHOT_HV(T, 2), ELU_ONE_SHOT_HV(T, 4), ELU_ONE_SHOT_HV(T, 8)
#define ELU_GRID_STRIDE_T(T) Shape{T, 1, false, true, &launch_grid_stride<T>}

constexpr Shape kShapes[] = {
    ELU_ONE_SHOT_T(64),      ELU_ONE_SHOT_T(128),     ELU_ONE_SHOT_T(256),     ELU_ONE_SHOT_T(512),
    ELU_ONE_SHOT_T(1024),    ELU_GRID_STRIDE_T(128),  ELU_GRID_STRIDE_T(256),  ELU_GRID_STRIDE_T(512),
    ELU_GRID_STRIDE_T(1024),
};

// Process-global: the shape every launch_elu call uses (default: step 2's).
constexpr int kDefault = 2 * 4 * 2;  // ELU_ONE_SHOT_T(256)'s first entry
static_assert(kShapes[kDefault].threads == 256 && kShapes[kDefault].vectors == 1 && !kShapes[kDefault].hints &&
              !kShapes[kDefault].grid_stride, "the default launch shape must be step 2's: 256 x 1, no hints");
const Shape* g_shape = &kShapes[kDefault];
int64_t g_blocks_per_sm = 0;

const Shape* find_shape(int64_t threads, int64_t vectors, bool hints, bool grid_stride) {
  for (const Shape& s : kShapes) {
    if (s.threads == threads && s.vectors == vectors && s.hints == hints && s.grid_stride == grid_stride) return &s;
  }
  return nullptr;
}

}  // namespace

// In the table of common/table.cu under ELU_BINDING_LAUNCH_SHAPE; the binding
// checks the shape against elu_launch_shapes() first, with a clearer message.
void elu_set_launch_shape(int64_t threads, int64_t vectors, bool hints, int64_t blocks_per_sm) {
  if (blocks_per_sm < 0) throw std::invalid_argument("elu: blocks_per_sm must be >= 0");
  const Shape* s = find_shape(threads, vectors, hints, blocks_per_sm > 0);
  if (s == nullptr) {
    throw std::invalid_argument("elu: no launch-shape instance for threads=" + std::to_string(threads) +
                                " vectors=" + std::to_string(vectors) + " hints=" + std::to_string(hints) +
                                " blocks_per_sm=" + std::to_string(blocks_per_sm));
  }
  g_shape = s;
  g_blocks_per_sm = blocks_per_sm;
}

// (threads, vectors, hints, grid_stride) of every instance, in table order.
std::vector<std::tuple<int64_t, int64_t, bool, bool>> elu_launch_shapes() {
  std::vector<std::tuple<int64_t, int64_t, bool, bool>> out;
  for (const Shape& s : kShapes) out.emplace_back(s.threads, s.vectors, s.hints, s.grid_stride);
  return out;
}

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  if (!elu::vector_path_or_fallback<Op>(x, y, n, alpha, stream)) return;
  g_shape->launch(x, y, n, alpha, stream, g_blocks_per_sm);
}
