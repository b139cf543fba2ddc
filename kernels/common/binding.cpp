// The two faces of every build, compiled once per torch and CUDA version and shared by every build
// (elu_study.core.build): a build exports its launch functions in one table (common/table.h), and
// register_variant(namespace, table, delegate16) gives it, at run time:
//
// - the binding (pybind11): module.elu(x, alpha, out) and module.elu_backward(...), the kernels alone, which
//   validate the tensors, pick the output and launch on the current PyTorch stream (the study times these);
// - the operator (PyTorch's dispatcher, below "The operator"): torch.ops.<ns>.elu / elu_ / elu_backward with a
//   CUDA kernel per build, ATen for every input no kernel takes, autograd in C++ (double backward through a
//   differentiable formula), and module.call_elu / call_elu_, the eager entry points into the dispatcher.
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <ATen/FuncTorchTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/elu_backward.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided_cuda_dispatch.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/VariableTypeUtils.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include "common/table.h"

using Unary = at::Tensor(const at::Tensor&, double);
using UnaryInPlace = void(at::Tensor&, double);  // no output: functionalization takes no aliased ones
using Backward = at::Tensor(const at::Tensor&, const at::Tensor&, double, bool);

// One registered build: its namespace (torch.ops.<ns>), its launch table, its operator handles (looked up once
// after registration: the dispatcher's handles are stable), the namespace its 16-bit tensors are delegated to
// (empty: none), and the libraries that keep its registrations alive (for the life of the process).
struct Variant {
  std::string ns;
  const elu::KernelTable* k = nullptr;
  std::string delegate16;
  std::optional<c10::TypedOperatorHandle<Unary>> elu;
  std::optional<c10::TypedOperatorHandle<UnaryInPlace>> elu_;
  std::optional<c10::TypedOperatorHandle<Backward>> backward;
  // The delegate's handles, looked up at its first call (a cache: set through a const Variant).
  mutable std::optional<c10::TypedOperatorHandle<Unary>> elu_delegate;
  mutable std::optional<c10::TypedOperatorHandle<UnaryInPlace>> elu_delegate_;
  mutable std::optional<c10::TypedOperatorHandle<Backward>> backward_delegate;
  mutable std::once_flag delegate_once;
  std::vector<std::unique_ptr<torch::Library>> libraries;
};

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
void check_input(const Variant& v, const at::Tensor& x) {
  if (!v.k->launch_elu_16) return check_float32_cuda(x, "input");
  TORCH_CHECK_VALUE(x.is_cuda(), "elu: input must be a CUDA tensor, got one on ", x.device());
  const auto t = x.scalar_type();
  TORCH_CHECK_TYPE(t == at::kFloat || t == at::kHalf || t == at::kBFloat16,
                   "elu: input must be float32, float16 or bfloat16, got ", t);
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

// The launches, shared by the binding and the operator: x and y (g, x_or_y and out) have one dtype and
// numel, and each holds its numel elements in one dense run from its data pointer (contiguous, or dense and
// non-overlapping with equal strides), on the current device. An elementwise kernel then needs no strides.
void launch_forward(const Variant& v, const at::Tensor& x, at::Tensor& y, double alpha) {
  if (x.numel() == 0) return;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  if (x.scalar_type() != at::kFloat && v.k->launch_elu_16) {
    v.k->launch_elu_16(x.const_data_ptr(), y.mutable_data_ptr(), x.numel(), static_cast<float>(alpha),
                       x.scalar_type() == at::kBFloat16, stream);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  v.k->launch_elu(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel(), static_cast<float>(alpha), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_backward(const Variant& v, const at::Tensor& g, const at::Tensor& x, at::Tensor& out, double alpha,
                     bool is_result) {
  if (g.numel() == 0) return;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  if (g.scalar_type() != at::kFloat && v.k->launch_elu_backward_16) {
    v.k->launch_elu_backward_16(g.const_data_ptr(), x.const_data_ptr(), out.mutable_data_ptr(), g.numel(),
                                static_cast<float>(alpha), is_result, g.scalar_type() == at::kBFloat16, stream);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  v.k->launch_elu_backward(g.const_data_ptr<float>(), x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), g.numel(),
                      static_cast<float>(alpha), is_result, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Every check runs before any state (device guard, copies) exists, so a
// rejected call leaves nothing behind and the CUDA context untouched.
at::Tensor elu(const Variant& v, const at::Tensor& x, double alpha, const pybind11::object& out_arg) {
  check_input(v, x);
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
  launch_forward(v, xc, y, alpha);
  return y;
}

// The dtypes elu_backward() takes: float32, and float16/bfloat16 where the kernel file has a 16-bit backward.
bool backward_dtype_ok(const Variant& v, at::ScalarType t) {
  return t == at::kFloat || (v.k->launch_elu_backward_16 && (t == at::kHalf || t == at::kBFloat16));
}

const char* backward_dtypes(const Variant& v) {
  return v.k->launch_elu_backward_16 ? "float32, float16 or bfloat16" : "float32";
}

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
at::Tensor elu_backward(const Variant& v, const at::Tensor& grad, const at::Tensor& x, double alpha, bool is_result,
                        const pybind11::object& out_arg) {
  const char* xname = is_result ? "result" : "x";
  TORCH_CHECK_VALUE(grad.is_cuda(), "elu_backward: grad_output must be a CUDA tensor, got one on ", grad.device());
  TORCH_CHECK_TYPE(backward_dtype_ok(v, grad.scalar_type()), "elu_backward: grad_output must be ", backward_dtypes(v),
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
  launch_backward(v, gc, xc, result, alpha, is_result);
  return result;
}

// Checked here, before any state changes, so that a shape with no instance raises a ValueError
// that lists the instances; the kernel file checks again.
void set_launch_shape(const Variant& v, int64_t threads, int64_t vectors, bool hints, int64_t blocks_per_sm) {
  TORCH_CHECK_VALUE(blocks_per_sm >= 0, "elu: blocks_per_sm must be >= 0 (0: one-shot grid), got " +
                    std::to_string(blocks_per_sm));
  const bool grid_stride = blocks_per_sm > 0;
  std::string known;
  for (const auto& [t, n, h, g] : v.k->launch_shapes()) {
    if (t == threads && n == vectors && h == hints && g == grid_stride) {
      v.k->set_launch_shape(threads, vectors, hints, blocks_per_sm);
      return;
    }
    if (g == grid_stride) known += " " + std::to_string(t) + "x" + std::to_string(n) + (h ? "+hints" : "");
  }
  TORCH_CHECK_VALUE(false, "elu: no launch-shape instance for threads=" + std::to_string(threads) + ", vectors=" +
                    std::to_string(vectors) + ", hints=" + (hints ? "True" : "False") + " " +
                    (grid_stride ? "with a grid-stride loop (blocks_per_sm > 0)" : "in a one-shot grid (blocks_per_sm = 0)") +
                    "; instances (threads x vectors):" + known);
}

// ---------------------------------------------------------------- the operator
//
//   elu(Tensor self, float alpha=1.0) -> Tensor                       F.elu(self, alpha)
//   elu_(Tensor(a!) self, float alpha=1.0) -> ()                      F.elu(self, alpha, inplace=True)
//   elu_backward(Tensor grad_output, Tensor self_or_result, float alpha, bool is_result) -> Tensor
//                                        aten.elu_backward(grad_output, alpha, 1, 1, is_result, self_or_result)
//
// Who computes a CUDA tensor: this build's kernel where it takes the dtype; a float16/bfloat16 one, where the
// build was registered with a delegate16 namespace, the operator of the build in that namespace (the drop-in's defaults: step 7);
// anything else (float64, integers, a non-finite alpha) ATen. Every other device: ATen
// (CompositeExplicitAutograd). Layout, on every route: a dense, non-overlapping input (channels_last
// included) is computed in its own memory order into an output with its strides; any other is made
// contiguous first. elu_study.pytorch.ops registers the fake implementations with the same rule, and its
// refusal() (strict=True) names what forward_route gives ATen.

enum class Route { kKernel, kDelegate, kATen };

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const std::string& ns, const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow((ns + "::" + name).c_str(), "").typed<Signature>();
}

bool sixteen_bits(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

Route forward_route(const Variant& v, const at::Tensor& x, double alpha) {
  if (!std::isfinite(alpha)) return Route::kATen;
  const auto t = x.scalar_type();
  if (t == at::kFloat) return Route::kKernel;
  if (!sixteen_bits(t)) return Route::kATen;
  if (!v.delegate16.empty()) return Route::kDelegate;
  return v.k->launch_elu_16 ? Route::kKernel : Route::kATen;
}

Route backward_route(const Variant& v, const at::Tensor& grad, const at::Tensor& saved, double alpha) {
  const auto t = grad.scalar_type();
  if (!std::isfinite(alpha) || saved.scalar_type() != t || !saved.is_cuda() || saved.device() != grad.device()) {
    return Route::kATen;
  }
  if (t == at::kFloat) return Route::kKernel;
  if (!sixteen_bits(t)) return Route::kATen;
  if (!v.delegate16.empty()) return Route::kDelegate;
  return v.k->launch_elu_backward_16 ? Route::kKernel : Route::kATen;
}

// The build that computes 16-bit tensors, entered at its CUDA kernel (this call is already below autograd); its
// handles are looked up at the first delegated call (it may register after this build).
const c10::DispatchKeySet kCUDA(c10::DispatchKey::CUDA);
const Variant& delegated(const Variant& v) {
  std::call_once(v.delegate_once, [&v] {
    v.elu_delegate.emplace(find_op<Unary>(v.delegate16, "elu"));
    v.elu_delegate_.emplace(find_op<UnaryInPlace>(v.delegate16, "elu_"));
    v.backward_delegate.emplace(find_op<Backward>(v.delegate16, "elu_backward"));
  });
  return v;
}

// The layout rule: x itself if dense and non-overlapping (its strides kept), else a contiguous copy.
at::Tensor dense(const at::Tensor& x) { return x.is_non_overlapping_and_dense() ? x : x.contiguous(); }

// A new CUDA tensor with a dense x's sizes and strides (empty_like's preserve_format). at::cuda::empty_strided is
// ATen's CUDA kernel of empty_strided entered directly (its generated per-backend function), as aten's own CUDA
// kernels allocate their outputs: inside a CUDA kernel the dispatcher has nothing left to choose, and a second
// pass through it (its profiler hook included) cost the drop-in's calls host time that nn.ELU's do not spend.
at::Tensor like(const at::Tensor& x) { return at::cuda::empty_strided(x.sizes(), x.strides(), x.options()); }

// grad and the saved tensor in one dense layout: as they are where they share one; else the saved tensor's (the
// forward's layout, channels_last included), grad alone copied into it (a broadcast gradient, as a pooling
// layer's backward gives, or another layout); both contiguous only where the saved tensor is not dense.
std::pair<at::Tensor, at::Tensor> dense_pair(const at::Tensor& grad, const at::Tensor& saved) {
  if (grad.is_non_overlapping_and_dense() && saved.strides() == grad.strides()) return {grad, saved};
  if (saved.is_non_overlapping_and_dense()) {
    at::Tensor g = at::cuda::empty_strided(saved.sizes(), saved.strides(), grad.options());
    g.copy_(grad);
    return {g, saved};
  }
  return {grad.contiguous(), saved.contiguous()};
}

void check_shapes(const at::Tensor& grad, const at::Tensor& saved, bool is_result) {
  // aten.elu_backward would broadcast; the kernels take equal shapes, and so does every route here.
  TORCH_CHECK_VALUE(grad.sizes() == saved.sizes(), "elu_backward: ", is_result ? "result" : "self", " has shape ",
                    shape(saved), " but grad_output has shape ", shape(grad));
}

at::Tensor elu_aten(const at::Tensor& x, double alpha) { return at::elu(dense(x), alpha); }

void elu_inplace_aten(at::Tensor& x, double alpha) { at::elu_(x, alpha); }

at::Tensor elu_backward_aten(const at::Tensor& grad, const at::Tensor& saved, double alpha, bool is_result) {
  check_shapes(grad, saved, is_result);
  return at::elu_backward(grad, alpha, 1, 1, is_result, saved);  // TensorIterator takes any strides
}

at::Tensor elu_cuda(const Variant& v, const at::Tensor& x, double alpha) {
  switch (forward_route(v, x, alpha)) {
    case Route::kATen: return elu_aten(x, alpha);
    case Route::kDelegate: return delegated(v).elu_delegate->redispatch(kCUDA, x, alpha);
    default: break;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xd = dense(x);
  at::Tensor y = like(xd);
  launch_forward(v, xd, y, alpha);
  return y;
}

void elu_inplace_cuda(const Variant& v, at::Tensor& x, double alpha) {
  switch (forward_route(v, x, alpha)) {
    case Route::kATen: return elu_inplace_aten(x, alpha);
    case Route::kDelegate: return delegated(v).elu_delegate_->redispatch(kCUDA, x, alpha);
    default: break;
  }
  if (!x.is_non_overlapping_and_dense()) {
    x.copy_(elu_cuda(v, x, alpha));
    return;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  launch_forward(v, x, x, alpha);  // each element read, then written by the same thread
}

at::Tensor elu_backward_cuda(const Variant& v, const at::Tensor& grad, const at::Tensor& saved, double alpha,
                             bool is_result) {
  check_shapes(grad, saved, is_result);
  switch (backward_route(v, grad, saved, alpha)) {
    case Route::kATen: return elu_backward_aten(grad, saved, alpha, is_result);
    case Route::kDelegate:
      return delegated(v).backward_delegate->redispatch(kCUDA, grad, saved, alpha, is_result);
    default: break;
  }
  // PyTorch's own refusal (aten elu_backward), word for word.
  TORCH_CHECK(!is_result || alpha >= 0.0, "In-place elu backward calculation is triggered with a negative slope which "
              "is not supported. This is caused by calling in-place forward function with a negative slope, please "
              "call out-of-place version instead.");
  const c10::cuda::CUDAGuard guard(grad.device());
  const auto [g, s] = dense_pair(grad, saved);
  at::Tensor out = like(g);
  launch_backward(v, g, s, out, alpha, is_result);
  return out;
}

// ---------------------------------------------------------------- autograd, in C++

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool needs_grad(const at::Tensor& t) { return t.requires_grad() && at::GradMode::is_enabled(); }
// A forward-mode tangent, or a torch.func transform (grad, vjp, jvp, vmap) active: a C++ autograd::Function has
// neither a forward-mode formula nor functorch support (custom_function.h refuses it), so ATen, which has both,
// computes such calls. The check is custom_function.h's own; its TLS is empty outside torch.func.
bool in_transform() {
  const auto& functorch = at::functorch::functorchTLSAccessor();
  if (!functorch) return false;
  try {
    functorch->checkSupportsCppAutogradFunction();
    return false;
  } catch (const c10::Error&) {
    return true;
  }
}
bool has_tangent(const at::Tensor& t) { return t._fw_grad(/*level=*/0).defined() || in_transform(); }

// ELU's backward node, written as PyTorch's generated autograd kernels write theirs (VariableType's EluBackward0
// and, in place, EluBackward1): the saved tensor, alpha and is_result members, one output. Out of place it saves
// the input; in place the result (x itself after the kernel wrote it, so alpha >= 0), x's history rebased onto
// the node. It costs less per call than an autograd::Function (no context map, no generic output wrapping; with
// mark_dirty in place, more host time per call than nn.ELU(inplace=True), the activation timm's ResNets use), so
// that a call with requires_grad costs no more on the host than nn.ELU's. Its backward is the elu_backward op,
// itself differentiable.
struct EluBackwardNode : public torch::autograd::Node {
  torch::autograd::SavedVariable saved_;
  const Variant* v = nullptr;
  double alpha = 1.0;
  bool is_result = false;
  std::string name() const override { return v->ns + (is_result ? "::EluBackward (in place)" : "::EluBackward"); }
  void release_variables() override {
    const std::lock_guard<std::mutex> lock(mutex_);
    saved_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    variable_list out(1);
    if (grads[0].defined() && task_should_compute_output(0)) {
      out[0] = v->backward->call(grads[0], saved_.unpack(getptr()), alpha, is_result);
    }
    return out;
  }
};

// elu_backward's own derivatives, as PyTorch writes them (aten elu_double_backward, scale = input_scale = 1):
// d/d grad_output is elu_backward itself; d/d x is elu_backward(gg * grad, x) * (x < 0); d/d result is
// gg * grad * (result < 0).
struct EluBackwardFunction : public torch::autograd::Function<EluBackwardFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad, const at::Tensor& saved, double alpha,
                            bool is_result, int64_t variant) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["is_result"] = is_result;
    ctx->saved_data["variant"] = variant;
    ctx->save_for_backward({grad, saved});
    return reinterpret_cast<const Variant*>(variant)->backward->call(grad, saved, alpha, is_result);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& grad = saved[0];
    const at::Tensor& x_or_y = saved[1];
    const at::Tensor& gg = grads[0];
    const double alpha = ctx->saved_data["alpha"].toDouble();
    const bool is_result = ctx->saved_data["is_result"].toBool();
    const auto& op = *reinterpret_cast<const Variant*>(ctx->saved_data["variant"].toInt())->backward;
    at::Tensor d_grad, d_saved;
    if (ctx->needs_input_grad(0)) d_grad = op.call(gg, x_or_y, alpha, is_result);
    if (ctx->needs_input_grad(1)) {
      const at::Tensor negative = (x_or_y < 0).to(gg.scalar_type());
      d_saved = is_result ? gg * grad * negative : op.call(gg * grad, x_or_y, alpha, false) * negative;
    }
    return {d_grad, d_saved, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// A new node as PyTorch's own kernels make one: torch 2.11 holds nodes by std::shared_ptr (freed by deleteNode,
// which unwinds long graphs without recursion), later releases by c10::intrusive_ptr.
template <class T>
auto make_node() {
  if constexpr (std::is_base_of_v<c10::intrusive_ptr_target, torch::autograd::Node>) {
    return c10::make_intrusive<T>();
  } else {
    return std::shared_ptr<T>(new T(), [](T* p) { deleteNode(p); });  // found by ADL, in torch::autograd
  }
}

at::Tensor elu_autograd(const Variant& v, c10::DispatchKeySet ks, const at::Tensor& input, double alpha) {
  if (has_tangent(input)) return at::elu(dense(input), alpha);
  // The layout rule applied here, above autograd, as F.elu(x.contiguous()) would: a non-dense input's contiguous
  // copy (with its own history) is what the kernel reads and the node saves, so that the backward reads the
  // forward's layout (aten's CPU loops differ by an ulp between a strided and a contiguous operand).
  const at::Tensor x = dense(input);
  const c10::DispatchKeySet below = ks & c10::after_ADInplaceOrView_keyset;
  decltype(make_node<EluBackwardNode>()) node;
  if (needs_grad(x)) {
    node = make_node<EluBackwardNode>();
    node->set_next_edges(torch::autograd::collect_next_edges(x));
    node->v = &v;
    node->alpha = alpha;
    node->saved_ = torch::autograd::SavedVariable(x, /*is_output=*/false);
  }
  at::Tensor y = [&] {
    at::AutoDispatchBelowADInplaceOrView guard;
    return v.elu->redispatch(below, x, alpha);
  }();
  if (node) torch::autograd::set_history(y, node);
  return y;
}

void elu_inplace_autograd(const Variant& v, c10::DispatchKeySet ks, at::Tensor& x, double alpha) {
  if (has_tangent(x)) {
    at::elu_(x, alpha);
    return;
  }
  const bool grad = needs_grad(x);
  if (grad) {
    TORCH_CHECK(alpha >= 0.0, "In-place elu backward calculation is triggered with a negative slope which is not "
                "supported. This is caused by calling in-place forward function with a negative slope, please call "
                "out-of-place version instead.");
  }
  // As VariableType's elu_: refuse a leaf that requires grad (or a view of one) before anything is written.
  torch::autograd::check_inplace(x, grad);
  decltype(make_node<EluBackwardNode>()) node;
  if (grad) {
    node = make_node<EluBackwardNode>();
    node->set_next_edges(torch::autograd::collect_next_edges(x));
    node->v = &v;
    node->alpha = alpha;
    node->is_result = true;
  }
  {
    at::AutoDispatchBelowADInplaceOrView below;
    v.elu_->redispatch(ks & c10::after_ADInplaceOrView_keyset, x, alpha);
  }
  torch::autograd::increment_version(x);  // written below autograd: say so, as an in-place aten op does
  if (node) {
    torch::autograd::rebase_history(x, node);  // a view's base gets the CopySlices node, as for aten's elu_
    node->saved_ = torch::autograd::SavedVariable(x, /*is_output=*/true, x.is_view());
  }
}

at::Tensor elu_backward_autograd(const Variant& v, c10::DispatchKeySet ks, const at::Tensor& grad,
                                 const at::Tensor& saved, double alpha, bool is_result) {
  if (has_tangent(grad) || has_tangent(saved)) {
    check_shapes(grad, saved, is_result);
    return at::elu_backward(grad, alpha, 1, 1, is_result, saved);
  }
  if (!needs_grad(grad) && !needs_grad(saved)) {  // every backward pass without create_graph: below autograd
    at::AutoDispatchBelowADInplaceOrView below;
    return v.backward->redispatch(ks & c10::after_ADInplaceOrView_keyset, grad, saved, alpha, is_result);
  }
  return EluBackwardFunction::apply(grad, saved, alpha, is_result, reinterpret_cast<int64_t>(&v));
}

// ---------------------------------------------------------------- registration, at run time

// The operator of one build, registered with libraries built at run time (what TORCH_LIBRARY and
// TORCH_LIBRARY_IMPL expand to, for a namespace known only when the build is loaded): the schema, a CUDA kernel,
// ATen for every other device (CompositeExplicitAutograd), autograd in C++.
void register_operator(Variant& v) {
  auto library = [&v](torch::Library::Kind kind, std::optional<c10::DispatchKey> key) -> torch::Library& {
    v.libraries.push_back(std::make_unique<torch::Library>(kind, v.ns, key, __FILE__, __LINE__));
    return *v.libraries.back();
  };
  const Variant* p = &v;
  auto& def = library(torch::Library::DEF, std::nullopt);
  def.set_python_module("elu_study.pytorch.ops");  // where the fake implementations are registered
  def.def("elu(Tensor self, float alpha=1.0) -> Tensor");
  def.def("elu_(Tensor(a!) self, float alpha=1.0) -> ()");
  def.def("elu_backward(Tensor grad_output, Tensor self_or_result, float alpha, bool is_result) -> Tensor");

  auto& cuda = library(torch::Library::IMPL, c10::DispatchKey::CUDA);
  cuda.impl("elu", [p](const at::Tensor& x, double alpha) { return elu_cuda(*p, x, alpha); });
  cuda.impl("elu_", [p](at::Tensor& x, double alpha) { elu_inplace_cuda(*p, x, alpha); });
  cuda.impl("elu_backward", [p](const at::Tensor& g, const at::Tensor& s, double alpha, bool is_result) {
    return elu_backward_cuda(*p, g, s, alpha, is_result);
  });

  auto& composite = library(torch::Library::IMPL, c10::DispatchKey::CompositeExplicitAutograd);
  composite.impl("elu", &elu_aten);
  composite.impl("elu_", &elu_inplace_aten);
  composite.impl("elu_backward", &elu_backward_aten);

  auto& autograd = library(torch::Library::IMPL, c10::DispatchKey::Autograd);
  autograd.impl("elu", [p](c10::DispatchKeySet ks, const at::Tensor& x, double alpha) {
    return elu_autograd(*p, ks, x, alpha);
  });
  autograd.impl("elu_", [p](c10::DispatchKeySet ks, at::Tensor& x, double alpha) {
    elu_inplace_autograd(*p, ks, x, alpha);
  });
  autograd.impl("elu_backward", [p](c10::DispatchKeySet ks, const at::Tensor& g, const at::Tensor& s, double alpha,
                                    bool is_result) { return elu_backward_autograd(*p, ks, g, s, alpha, is_result); });

  v.elu.emplace(find_op<Unary>(v.ns, "elu"));
  v.elu_.emplace(find_op<UnaryInPlace>(v.ns, "elu_"));
  v.backward.emplace(find_op<Backward>(v.ns, "elu_backward"));
}

// The eager entry points, in CPython's fastcall convention: (tensor, alpha) in, into the dispatcher at its top.
// (pybind11's own argument matching costs about as much as the dispatcher itself; torch's bindings do this.)
// Their self is a capsule holding the build's Variant.
bool unpack(PyObject* const* args, Py_ssize_t nargs, const char* name, double* alpha) {
  if (nargs != 2) {
    PyErr_Format(PyExc_TypeError, "%s(x, alpha) takes 2 arguments, got %zd", name, nargs);
    return false;
  }
  if (!THPVariable_Check(args[0])) {
    PyErr_Format(PyExc_TypeError, "%s: expected a Tensor, got %s", name, Py_TYPE(args[0])->tp_name);
    return false;
  }
  if (PyBool_Check(args[1]) || !PyNumber_Check(args[1]) || PyComplex_Check(args[1])) {
    PyErr_Format(PyExc_TypeError, "%s: alpha must be a real number (float or int), got %s", name,
                 Py_TYPE(args[1])->tp_name);
    return false;
  }
  *alpha = PyFloat_AsDouble(args[1]);
  return !(*alpha == -1.0 && PyErr_Occurred());
}

const Variant& of(PyObject* self) { return *static_cast<const Variant*>(PyCapsule_GetPointer(self, "elu_study.variant")); }

PyObject* call_elu(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  double alpha;
  if (!unpack(args, nargs, "elu", &alpha)) return nullptr;
  return THPVariable_Wrap(of(self).elu->call(THPVariable_Unpack(args[0]), alpha));
  END_HANDLE_TH_ERRORS
}

PyObject* call_elu_(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  double alpha;
  if (!unpack(args, nargs, "elu_", &alpha)) return nullptr;
  at::Tensor x = THPVariable_Unpack(args[0]);
  of(self).elu_->call(x, alpha);
  Py_INCREF(args[0]);
  return args[0];
  END_HANDLE_TH_ERRORS
}

PyMethodDef kEntryPoints[] = {
    {"call_elu", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call_elu)), METH_FASTCALL,
     "call_elu(x, alpha): torch.ops.<op_namespace>.elu(x, alpha), through the dispatcher"},
    {"call_elu_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call_elu_)), METH_FASTCALL,
     "call_elu_(x, alpha): torch.ops.<op_namespace>.elu_(x, alpha), through the dispatcher; returns x"},
};

// Every build registered in this process, by namespace; never freed (the dispatcher holds their kernels).
std::map<std::string, std::unique_ptr<Variant>>& registered() {
  static std::map<std::string, std::unique_ptr<Variant>> variants;
  return variants;
}

// A build's table (the address elu_kernel_table() returned) under torch.ops.<ns>: its module's functions.
pybind11::dict register_variant(const std::string& ns, uintptr_t table, const std::string& delegate16) {
  auto& variants = registered();
  const auto* k = reinterpret_cast<const elu::KernelTable*>(table);
  TORCH_CHECK(k != nullptr && k->version == elu::kKernelTableVersion, "elu: the build's kernel table is version ",
              k ? k->version : -1, ", the binding reads version ", elu::kKernelTableVersion, ": rebuild it");
  auto found = variants.find(ns);
  if (found == variants.end()) {
    auto v = std::make_unique<Variant>();
    v->ns = ns;
    v->k = k;
    v->delegate16 = delegate16;
    register_operator(*v);
    found = variants.emplace(ns, std::move(v)).first;
  }
  TORCH_CHECK(found->second->k == k, "elu: torch.ops.", ns, " is registered already, by another build");
  const Variant* v = found->second.get();
  namespace py = pybind11;
  py::dict m;
  m["elu"] = py::cpp_function([v](const at::Tensor& x, double alpha, const py::object& out) {
    return elu(*v, x, alpha, out);
  }, "ELU(x) = x if x > 0 else alpha * (exp(x) - 1), float32 on CUDA", py::arg("x"), py::arg("alpha") = 1.0,
     py::arg("out") = py::none());
  m["elu_backward"] = py::cpp_function([v](const at::Tensor& g, const at::Tensor& x, double alpha, bool is_result,
                                           const py::object& out) { return elu_backward(*v, g, x, alpha, is_result, out); },
      "grad_in = grad_output * (x > 0 ? 1 : alpha * exp(x)), as aten elu_backward; with is_result, from "
      "result = ELU(x) (alpha >= 0): grad_output * (result > 0 ? 1 : result + alpha). float32 on CUDA (and "
      "float16/bfloat16 where the kernel file has a 16-bit backward)",
      py::arg("grad_output"), py::arg("x"), py::arg("alpha") = 1.0, py::arg("is_result") = false,
      py::arg("out") = py::none());
  if (v->k->set_launch_shape && v->k->launch_shapes) {
    m["set_launch_shape"] = py::cpp_function([v](int64_t threads, int64_t vectors, bool hints, int64_t blocks_per_sm) {
      set_launch_shape(*v, threads, vectors, hints, blocks_per_sm);
    }, "Choose the launch of every later elu() call in this process (process-global host state): threads per "
       "block, float4s per thread, streaming hints (__ldcs/__stcs), and blocks_per_sm = 0 for a one-shot grid or "
       "> 0 for a grid-stride loop over blocks_per_sm x SMs blocks. ValueError for a shape with no instance.",
       py::arg("threads"), py::arg("vectors"), py::arg("hints"), py::arg("blocks_per_sm") = 0);
    m["launch_shapes"] = py::cpp_function([v] { return v->k->launch_shapes(); },
        "Every instantiated launch shape: (threads, vectors, hints, grid_stride) tuples; grid_stride ones take "
        "blocks_per_sm > 0");
  }
  m["op_namespace"] = ns;
  // The operator's eager entry points (elu_study.ELU calls these): into the dispatcher at its top, as torch.ops
  // does, without torch.ops' boxed argument parsing.
  py::object self = py::reinterpret_steal<py::object>(PyCapsule_New(const_cast<Variant*>(v), "elu_study.variant", nullptr));
  for (auto& def : kEntryPoints) {
    m[def.ml_name] = py::reinterpret_steal<py::object>(PyCFunction_New(&def, self.ptr()));
  }
  return m;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("register_variant", &register_variant,
        "Register a build's kernel table (the address of its elu_kernel_table()) as torch.ops.<ns>; its 16-bit "
        "tensors go to the build registered as torch.ops.<delegate16> where that is not empty. Returns the "
        "build's functions (elu, elu_backward, call_elu, call_elu_, ...)",
        pybind11::arg("ns"), pybind11::arg("table"), pybind11::arg("delegate16") = "");
}
