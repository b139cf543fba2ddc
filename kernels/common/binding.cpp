// The Python face of every step: validates the tensors, picks the output, and
// calls the step's launch_elu on the current PyTorch stream. Compiled once per
// step by elu_study.compile_variant, beside that step's .cu file.
#include <cmath>
#include <optional>

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream);

namespace {

void check_float32_cuda(const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.is_cuda(), "elu: ", what, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, "elu: ", what, " must be float32, got ", t.scalar_type());
}

at::Tensor elu(const at::Tensor& x, double alpha, std::optional<at::Tensor> out) {
  check_float32_cuda(x, "input");
  TORCH_CHECK_VALUE(std::isfinite(alpha), "elu: alpha must be finite, got ", alpha);
  const c10::cuda::CUDAGuard guard(x.device());
  // Non-contiguous inputs are copied once into a dense buffer: simple and correct.
  const at::Tensor xc = x.contiguous();
  at::Tensor y;
  if (out.has_value()) {
    y = *out;
    check_float32_cuda(y, "out");
    TORCH_CHECK_VALUE(y.device() == x.device(), "elu: out is on ", y.device(), " but input is on ", x.device());
    TORCH_CHECK_VALUE(y.sizes() == x.sizes(), "elu: out has shape ", y.sizes(), " but input has shape ", x.sizes());
    TORCH_CHECK_VALUE(y.is_contiguous(), "elu: out must be contiguous");
    at::assert_no_partial_overlap(y, xc);  // exact in-place (out is x) is fine elementwise
  } else {
    y = at::empty_like(xc, at::MemoryFormat::Contiguous);
  }
  if (x.numel() == 0) return y;
  launch_elu(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.numel(), static_cast<float>(alpha),
             c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("elu", &elu, "ELU(x) = x if x > 0 else alpha * (exp(x) - 1), float32 on CUDA", pybind11::arg("x"),
        pybind11::arg("alpha") = 1.0, pybind11::arg("out") = pybind11::none());
}
