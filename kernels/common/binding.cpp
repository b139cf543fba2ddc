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
// Every build also has kernels/common/backward.cu (elu_study.build appends it): grad_in from
// grad and x (or, with is_result, from y = ELU(x)); all three hold n contiguous floats.
void launch_elu_backward(const float* g, const float* x_or_y, float* out, int64_t n, float alpha, bool is_result,
                         cudaStream_t stream);
#ifdef ELU_BINDING_STORAGE16
// A kernel file with "// elu-study: binding = storage16" also defines this: x and y
// hold n contiguous 16-bit floats (bfloat16 if bf16, else float16); math in float32.
void launch_elu_16(const void* x, void* y, int64_t n, float alpha, bool bf16, cudaStream_t stream);
#endif
#ifdef ELU_BINDING_BACKWARD16
// A kernel file with "// elu-study: binding = ... backward16" also defines this: g, x_or_y and out hold n
// contiguous 16-bit floats of one dtype (bfloat16 if bf16, else float16); math in float32, one rounding.
void launch_elu_backward_16(const void* g, const void* x_or_y, void* out, int64_t n, float alpha, bool is_result,
                            bool bf16, cudaStream_t stream);
#endif
#ifdef ELU_BINDING_LAUNCH_SHAPE
#include <tuple>
#include <vector>
// A kernel file with "// elu-study: binding = launch-shape" (kernels/sweeps/launch_shapes.cu) defines
// these: the launch shape that launch_elu uses is chosen at run time, process-wide (host state).
void elu_set_launch_shape(int64_t threads, int64_t vectors, bool hints, int64_t blocks_per_sm);
std::vector<std::tuple<int64_t, int64_t, bool, bool>> elu_launch_shapes();  // (threads, vectors, hints, grid_stride)
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

// float32 as Python spells it; the 16-bit types as c10 does (Half, BFloat16).
std::string dtype_name(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat ? std::string("float32") : std::string(c10::toString(t.scalar_type()));
}

void check_out(const at::Tensor& out, const at::Tensor& x) {
  TORCH_CHECK_VALUE(out.is_cuda(), "elu: out must be a CUDA tensor, got one on ", out.device());
  TORCH_CHECK_TYPE(out.scalar_type() == x.scalar_type(), "elu: out must be ", dtype_name(x),
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

// The dtypes elu_backward() takes: float32, and float16/bfloat16 where the kernel file has a 16-bit backward.
bool backward_dtype_ok(at::ScalarType t) {
#ifdef ELU_BINDING_BACKWARD16
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
#else
  return t == at::kFloat;
#endif
}

#ifdef ELU_BINDING_BACKWARD16
constexpr const char* kBackwardDtypes = "float32, float16 or bfloat16";
#else
constexpr const char* kBackwardDtypes = "float32";
#endif

void check_backward_out(const at::Tensor& out, const at::Tensor& grad) {
  TORCH_CHECK_VALUE(out.is_cuda(), "elu_backward: out must be a CUDA tensor, got one on ", out.device());
  TORCH_CHECK_TYPE(out.scalar_type() == grad.scalar_type(), "elu_backward: out must be ", dtype_name(grad),
                   " like the inputs, got ", out.scalar_type());
  TORCH_CHECK_VALUE(out.device() == grad.device(), "elu_backward: out is on ", out.device(),
                    " but grad_output is on ", grad.device());
  TORCH_CHECK_VALUE(out.sizes() == grad.sizes(), "elu_backward: out has shape ", shape(out),
                    " but grad_output has shape ", shape(grad));
  TORCH_CHECK_VALUE(out.is_contiguous(), "elu_backward: out must be contiguous");
}

// grad_in = grad_output * dELU/dx, as aten elu_backward (scale = input_scale = 1), in the inputs' dtype;
// the same checks, messages and order as elu(): all before any launch or copy.
at::Tensor elu_backward(const at::Tensor& grad, const at::Tensor& x, double alpha, bool is_result,
                        const pybind11::object& out_arg) {
  const char* xname = is_result ? "result" : "x";
  TORCH_CHECK_VALUE(grad.is_cuda(), "elu_backward: grad_output must be a CUDA tensor, got one on ", grad.device());
  TORCH_CHECK_TYPE(backward_dtype_ok(grad.scalar_type()), "elu_backward: grad_output must be ", kBackwardDtypes,
                   ", got ", grad.scalar_type());
  TORCH_CHECK_VALUE(x.is_cuda(), "elu_backward: ", xname, " must be a CUDA tensor, got one on ", x.device());
  TORCH_CHECK_TYPE(x.scalar_type() == grad.scalar_type(), "elu_backward: ", xname, " must be ", dtype_name(grad),
                   " like grad_output, got ", x.scalar_type());
  TORCH_CHECK_VALUE(std::isfinite(alpha), "elu_backward: alpha must be finite, got " + std::to_string(alpha));
  // PyTorch's own refusal (aten elu_backward), word for word after the prefix.
  TORCH_CHECK(!is_result || alpha >= 0.0, "elu_backward: In-place elu backward calculation is triggered with a negative "
              "slope which is not supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead.");
  TORCH_CHECK_VALUE(x.device() == grad.device(), "elu_backward: ", xname, " is on ", x.device(),
                    " but grad_output is on ", grad.device());
  TORCH_CHECK_VALUE(x.sizes() == grad.sizes(), "elu_backward: ", xname, " has shape ", shape(x),
                    " but grad_output has shape ", shape(grad));
  const bool has_out = !out_arg.is_none();
  at::Tensor out;
  if (has_out) {
    out = out_arg.cast<at::Tensor>();
    check_backward_out(out, grad);
    TORCH_CHECK(!partially_overlap(out, grad) && !partially_overlap(out, x),
                "elu_backward: out shares memory with an input without being it; "
                "pass out=grad_output for in-place, or a separate tensor");
  }
  const c10::cuda::CUDAGuard guard(grad.device());
  const at::Tensor gc = grad.contiguous();
  const at::Tensor xc = x.contiguous();
  at::Tensor result = has_out ? out : at::empty_like(gc, at::MemoryFormat::Contiguous);
  if (grad.numel() == 0) return result;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
#ifdef ELU_BINDING_BACKWARD16
  if (gc.scalar_type() != at::kFloat) {
    launch_elu_backward_16(gc.const_data_ptr(), xc.const_data_ptr(), result.mutable_data_ptr(), gc.numel(),
                           static_cast<float>(alpha), is_result, gc.scalar_type() == at::kBFloat16, stream);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return result;
  }
#endif
  launch_elu_backward(gc.const_data_ptr<float>(), xc.const_data_ptr<float>(), result.mutable_data_ptr<float>(),
                      gc.numel(), static_cast<float>(alpha), is_result, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return result;
}

#ifdef ELU_BINDING_LAUNCH_SHAPE
// Checked here, before any state changes, so that a shape with no instance raises a ValueError
// that lists the instances; the kernel file checks again.
void set_launch_shape(int64_t threads, int64_t vectors, bool hints, int64_t blocks_per_sm) {
  TORCH_CHECK_VALUE(blocks_per_sm >= 0, "elu: blocks_per_sm must be >= 0 (0: one-shot grid), got " +
                    std::to_string(blocks_per_sm));
  const bool grid_stride = blocks_per_sm > 0;
  std::string known;
  for (const auto& [t, v, h, g] : elu_launch_shapes()) {
    if (t == threads && v == vectors && h == hints && g == grid_stride) {
      elu_set_launch_shape(threads, vectors, hints, blocks_per_sm);
      return;
    }
    if (g == grid_stride) known += " " + std::to_string(t) + "x" + std::to_string(v) + (h ? "+hints" : "");
  }
  TORCH_CHECK_VALUE(false, "elu: no launch-shape instance for threads=" + std::to_string(threads) + ", vectors=" +
                    std::to_string(vectors) + ", hints=" + (hints ? "True" : "False") + " " +
                    (grid_stride ? "with a grid-stride loop (blocks_per_sm > 0)" : "in a one-shot grid (blocks_per_sm = 0)") +
                    "; instances (threads x vectors):" + known);
}
#endif

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("elu", &elu, "ELU(x) = x if x > 0 else alpha * (exp(x) - 1), float32 on CUDA", pybind11::arg("x"),
        pybind11::arg("alpha") = 1.0, pybind11::arg("out") = pybind11::none());
#ifdef ELU_BINDING_LAUNCH_SHAPE
  m.def("set_launch_shape", &set_launch_shape,
        "Choose the launch of every later elu() call in this process (process-global host state): threads per "
        "block, float4s per thread, streaming hints (__ldcs/__stcs), and blocks_per_sm = 0 for a one-shot grid or "
        "> 0 for a grid-stride loop over blocks_per_sm x SMs blocks. ValueError for a shape with no instance.",
        pybind11::arg("threads"), pybind11::arg("vectors"), pybind11::arg("hints"), pybind11::arg("blocks_per_sm") = 0);
  m.def("launch_shapes", &elu_launch_shapes,
        "Every instantiated launch shape: (threads, vectors, hints, grid_stride) tuples; grid_stride ones take "
        "blocks_per_sm > 0");
#endif
  m.def("elu_backward", &elu_backward,
        "grad_in = grad_output * (x > 0 ? 1 : alpha * exp(x)), as aten elu_backward; with is_result, from "
        "result = ELU(x) (alpha >= 0): grad_output * (result > 0 ? 1 : result + alpha). float32 on CUDA (and "
        "float16/bfloat16 where the kernel file has a 16-bit backward)",
        pybind11::arg("grad_output"), pybind11::arg("x"), pybind11::arg("alpha") = 1.0,
        pybind11::arg("is_result") = false, pybind11::arg("out") = pybind11::none());
}
