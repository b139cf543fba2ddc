// A kernel file for elu_study.compile_variant: copy it, change the kernel, keep launch_elu's prototype.
//
//   import elu_study
//   mod = elu_study.compile_variant("my_elu.cu")  # nvcc only: no GPU needed (without one, built for sm_90 only)
//   elu_study.check_variant(mod)                  # on a GPU: against F.elu, as the study checks its steps
//   elu_study.time_variant(mod)                   # on a GPU: against copy_, as the study times its steps
//
// The contract: define this function, exactly (common/elu.cuh declares it; a build without it fails to link):
//
//   void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream);
//
// What the binding (kernels/common/binding.cpp) guarantees when it calls it:
// - x and y each hold n float32 values in one dense run (a non-dense input was copied first); n > 0 (an empty
//   tensor never reaches you) and may exceed 2^31: index in int64_t.
// - x and y may be misaligned: a view such as x[1:] starts 4 bytes past a 16-byte boundary, so check before
//   a float4 access (elu::vector_path_or_fallback does).
// - y may be x (in place: mod.elu(x, out=x), or the operator's elu_); no other overlap reaches you.
// - alpha is finite; the tensors are on the current device. Launch on `stream` (PyTorch's current stream) and
//   do not synchronize: the binding checks the launch when you return, and a C++ exception you throw becomes
//   a Python RuntimeError.
// - float32 CUDA tensors only: mod.elu refuses other dtypes (TypeError) and devices (ValueError); the operator
//   (mod.call_elu, torch.ops.<mod.op_namespace>.elu, elu_study.ELU(variant=...)) sends them to ATen.
// The build appends common/backward.cu (mod.elu_backward): launch_elu_backward and namespace elu::bwd are its.
#include "common/elu.cuh"

#ifndef MY_THREADS  // a knob: compile_variant("my_elu.cu", extra_cuda_cflags=["-DMY_THREADS=128"])
#define MY_THREADS 256
#endif

// ELU(v) = v for v > 0, else alpha * (e^v - 1). "v > 0 ?" sends NaN to the second branch, which keeps it NaN;
// expm1f is PyTorch's choice: near 0, expf(v) - 1 cancels and loses every digit.
struct MyElu {
  __device__ __forceinline__ float operator()(float v, float alpha) const { return v > 0.0f ? v : alpha * expm1f(v); }
};

// One float4 (16 bytes) per thread, on 16-byte-aligned pointers only. No __restrict__: y may be x.
__global__ void my_elu_kernel(const float4* x, float4* y, int64_t n4, float alpha) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // 64-bit: past 2^31 elements
  if (i < n4) y[i] = elu::apply4(x[i], alpha, MyElu{});
}

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  // Misaligned pointers: every element by the shared scalar kernel (false). Else it takes the last n % 4
  // elements, and whole float4s are left to this kernel (true where there are any).
  if (!elu::vector_path_or_fallback<MyElu>(x, y, n, alpha, stream)) return;
  constexpr int threads = MY_THREADS;
  const int64_t n4 = n / 4;
  my_elu_kernel<<<elu::grid_blocks(elu::ceil_div(n4, threads)), threads, 0, stream>>>(
      reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4, alpha);
}
