// Peer: the vendor-library way. cub::DeviceTransform::Transform (CCCL, shipped with
// nvcc) applies a functor elementwise; CUB picks the launch, the vector width and
// the handling of tails and alignment itself. The float32 functor is step 2's formula
// (elu::Expf: expf(x) - 1), so its results are bit-comparable with step 2's; on
// float16 and bfloat16 it is PyTorch's (expm1f in float32, one rounding), so they
// are bit-comparable with F.elu's (notebook 12).
// elu-study: binding = storage16
#include <cub/device/device_transform.cuh>

#include "common/elu.cuh"
#include "common/sixteen.cuh"

namespace {

struct EluExpf {
  float alpha;
  __device__ __forceinline__ float operator()(float x) const { return elu::Expf{}(x, alpha); }
};

template <class T>
struct Elu16 {
  float alpha;
  __device__ __forceinline__ T operator()(T x) const { return elu::from_float<T>(elu::Expm1f{}(elu::to_float(x), alpha)); }
};

template <class T, class F>
void transform(const T* x, T* y, int64_t n, F f, cudaStream_t stream) {
  elu::check(cub::DeviceTransform::Transform(x, y, n, f, stream), "cub::DeviceTransform::Transform");
}

}  // namespace

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  transform(x, y, n, EluExpf{alpha}, stream);
}

void launch_elu_16(const void* x, void* y, int64_t n, float alpha, bool bf16, cudaStream_t stream) {
  if (bf16) {
    transform(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), n, Elu16<__nv_bfloat16>{alpha},
              stream);
  } else {
    transform(static_cast<const __half*>(x), static_cast<__half*>(y), n, Elu16<__half>{alpha}, stream);
  }
}
