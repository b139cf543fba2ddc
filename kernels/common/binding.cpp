// The Python face of every step: validates the tensors, picks the output, and
// calls the step's launch_elu on the current PyTorch stream. Compiled once per
// step by elu_study.compile_variant, beside that step's .cu file.
#include <cmath>
#include <string>
#include <utility>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream);
#ifdef ELU_BINDING_STORAGE16
// A kernel file with "// elu-study: binding = storage16" also defines this: x and y
// hold n contiguous 16-bit floats (bfloat16 if bf16, else float16); math in float32.
void launch_elu_16(const void* x, void* y, int64_t n, float alpha, bool bf16, cudaStream_t stream);
#endif

namespace {

std::string shape(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t d = 0; d < t.dim(); ++d) s += std::to_string(t.size(d)) + (t.dim() == 1 || d + 1 < t.dim() ? "," : "");
  return s + ")";
}

// Byte ranges that the two tensors span; out is contiguous. An exact alias (out
// is a contiguous x) is fine elementwise; any other shared byte is refused.
bool partially_overlap(const at::Tensor& out, const at::Tensor& x) {
  auto span = [](const at::Tensor& t) {
    const auto* begin = static_cast<const char*>(t.const_data_ptr());
    int64_t last = 0;
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    return std::make_pair(begin, begin + (last + 1) * t.element_size());
  };
  if (out.numel() == 0 || x.numel() == 0) return false;
  const auto [o0, o1] = span(out);
  const auto [x0, x1] = span(x);
  const bool exact_alias = o0 == x0 && x.is_contiguous();
  return !exact_alias && o0 < x1 && x0 < o1;
}

void check_float32_cuda(const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.is_cuda(), "elu: ", what, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, "elu: ", what, " must be float32, got ", t.scalar_type());
}

// The dtypes elu() takes: float32, and float16/bfloat16 where the kernel file has a 16-bit path.
void check_input(const at::Tensor& x) {
#ifdef ELU_BINDING_STORAGE16
  TORCH_CHECK_VALUE(x.is_cuda(), "elu: input must be a CUDA tensor, got one on ", x.device());
  const auto t = x.scalar_type();
  TORCH_CHECK_TYPE(t == at::kFloat || t == at::kHalf || t == at::kBFloat16,
                   "elu: input must be float32, float16 or bfloat16, got ", t);
#else
  check_float32_cuda(x, "input");
#endif
}

void check_out(const at::Tensor& out, const at::Tensor& x) {
  TORCH_CHECK_VALUE(out.is_cuda(), "elu: out must be a CUDA tensor, got one on ", out.device());
  TORCH_CHECK_TYPE(out.scalar_type() == x.scalar_type(), "elu: out must be ",
                   x.scalar_type() == at::kFloat ? std::string("float32") : std::string(c10::toString(x.scalar_type())),
                   " like the input, got ", out.scalar_type());
}

// Every check runs before any state (device guard, copies) exists, so a
// rejected call leaves nothing behind and the CUDA context untouched.
at::Tensor elu(const at::Tensor& x, double alpha, const pybind11::object& out_arg) {
  check_input(x);
  // Numbers enter messages through std::to_string: streaming a double into the
  // error message crashed the process on the H200 image (torch 2.11).
  TORCH_CHECK_VALUE(std::isfinite(alpha), "elu: alpha must be finite, got " + std::to_string(alpha));
  const bool has_out = !out_arg.is_none();
  at::Tensor out;
  if (has_out) {
    out = out_arg.cast<at::Tensor>();
    check_out(out, x);
    TORCH_CHECK_VALUE(out.device() == x.device(), "elu: out is on ", out.device(), " but input is on ", x.device());
    TORCH_CHECK_VALUE(out.sizes() == x.sizes(), "elu: out has shape ", shape(out), " but input has shape ", shape(x));
    TORCH_CHECK_VALUE(out.is_contiguous(), "elu: out must be contiguous");
    TORCH_CHECK(!partially_overlap(out, x), "elu: out shares memory with the input without being it; "
                "pass out=x for in-place, or a separate tensor");
  }
  const c10::cuda::CUDAGuard guard(x.device());
  // Non-contiguous inputs are copied once into a dense buffer: simple and correct.
  const at::Tensor xc = x.contiguous();
  at::Tensor y = has_out ? out : at::empty_like(xc, at::MemoryFormat::Contiguous);
  if (x.numel() == 0) return y;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
#ifdef ELU_BINDING_STORAGE16
  if (xc.scalar_type() != at::kFloat) {
    launch_elu_16(xc.const_data_ptr(), y.mutable_data_ptr(), xc.numel(), static_cast<float>(alpha),
                  xc.scalar_type() == at::kBFloat16, stream);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
  }
#endif
  launch_elu(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.numel(), static_cast<float>(alpha), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("elu", &elu, "ELU(x) = x if x > 0 else alpha * (exp(x) - 1), float32 on CUDA", pybind11::arg("x"),
        pybind11::arg("alpha") = 1.0, pybind11::arg("out") = pybind11::none());
}
