"""Property-based tests of the operator (elu_study.pytorch.ops, .nn): for any shape (0-d, empty, non-contiguous,
channels-last), dtype, alpha, requires_grad, in place or not, through the function, the module and the op, the
result, its layout and its gradients are F.elu's; under torch.compile and autocast too; and bad inputs get an
error that names the problem, leave the input as it was, and the next call works.

On the CPU the operator's kernel is ATen's, so these exercise its real registration: the C++ autograd, the
layout rule, the entry point. With CUDA, also the kernels (float32: within the study's tolerance of F.elu;
16-bit and float64: bit for bit).
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from elu_study.core.check import ATOL, RTOL
from elu_study.pytorch import ops
from elu_study.pytorch.nn import ELU, swap_elu

EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
LAYOUTS = ["contiguous", "transposed", "strided", "offset", "channels_last"]
ALPHA = st.one_of(st.sampled_from([1.0, 0.5, 0.0, -0.7, 2.5, 1]),
                  st.floats(-3, 3, allow_nan=False, allow_infinity=False, width=32))


@pytest.fixture(scope="module", autouse=True)
def defaults():
    return ops.module_for(None)


@st.composite
def tensors(draw, dtypes=DTYPES, max_dims=4):
    """(a tensor of any of these layouts, its device name) as drawn; ``make`` builds it on a device."""
    layout = draw(st.sampled_from(LAYOUTS))
    dims = 4 if layout == "channels_last" else draw(st.integers(0, max_dims))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=dims, max_size=dims)))
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(st.integers(0, 2**16))
    specials = draw(st.booleans())
    return layout, shape, dtype, seed, specials


def make(spec, device: str) -> torch.Tensor:
    layout, shape, dtype, seed, specials = spec
    gen = torch.Generator().manual_seed(seed)
    big = (2 * shape[0] + 1,) + shape[1:] if shape else ()
    base = torch.randn(big if layout in ("strided", "offset") and shape else shape, generator=gen,
                       dtype=torch.float64) * 4
    if specials and base.numel():
        flat = base.view(-1)
        values = torch.tensor([0.0, -0.0, -1e-30, -104.0, 3e38, float("nan")], dtype=torch.float64)
        flat[: min(len(values), flat.numel())] = values[: flat.numel()]
    x = base.to(dtype=dtype, device=device)
    if layout == "strided" and shape:
        x = x[::2]
    elif layout == "offset" and shape:
        x = x[1: shape[0] + 1]
    elif layout == "transposed" and x.dim() >= 2:
        x = x.transpose(0, -1)
    elif layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def reference(x: torch.Tensor, alpha) -> torch.Tensor:
    """F.elu(x) on the layout the operator computes: x itself where dense and non-overlapping, else x.contiguous().
    (PyTorch's CPU ELU differs by an ulp between its vectorized and strided loops.)"""
    return F.elu(x if ops.dense(x) else x.contiguous(), alpha)


def kernel_float32(x: torch.Tensor) -> bool:
    """Whether the float32 kernel computed x (then within tolerance of F.elu, not bit for bit)."""
    return x.is_cuda and x.dtype == torch.float32


def close(got: torch.Tensor, want: torch.Tensor, approximate: bool) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype and got.device == want.device
    tol = {"rtol": RTOL, "atol": ATOL} if approximate else {"rtol": 0, "atol": 0}
    torch.testing.assert_close(got, want, equal_nan=True, **tol)


def significant_strides(t: torch.Tensor) -> list[int]:
    """The strides that place elements: those of dimensions longer than 1 (a size-1 dimension's is arbitrary)."""
    return [s for s, n in zip(t.stride(), t.shape) if n > 1]


def same(got: torch.Tensor, want: torch.Tensor, approximate: bool) -> None:
    """close, and on the same layout."""
    close(got, want, approximate)
    assert got.numel() == 0 or significant_strides(got) == significant_strides(want), (got.stride(), want.stride())


CALLS = {
    "function": lambda x, alpha, inplace: ops.elu(x, alpha, inplace=inplace),
    "module": lambda x, alpha, inplace: ELU(alpha, inplace)(x),
    "op": lambda x, alpha, inplace: torch.ops.elu_study.elu(x, alpha),
}


@EXAMPLES
@given(spec=tensors(), alpha=ALPHA, device=st.sampled_from(DEVICES), call=st.sampled_from(sorted(CALLS)),
       requires_grad=st.booleans())
def test_any_tensor_gets_felus_values_and_gradients(spec, alpha, device, call, requires_grad):
    x = make(spec, device)
    approx = kernel_float32(x)
    a = x.detach().requires_grad_(requires_grad)  # x's own layout
    want = reference(x, alpha)
    equal_input = x.detach().clone()
    got = CALLS[call](a, alpha, False)
    same(got, want, approx)
    assert got.requires_grad == requires_grad
    if requires_grad and x.numel():
        # grad on the layout the operator gives (and aten's CPU loops agree on: they differ on NaN between layouts)
        g = ops.like(x).copy_(torch.randn(x.shape, dtype=torch.float64))
        b = x.detach().requires_grad_()
        got.backward(g)
        reference(b, alpha).backward(g)
        close(a.grad, b.grad, approx)
    close(x, equal_input, False)  # not written


@EXAMPLES
@given(spec=tensors(), alpha=ALPHA, device=st.sampled_from(DEVICES), module=st.booleans())
def test_in_place_writes_the_input_as_f_elu_does(spec, alpha, device, module):
    x = make(spec, device)
    approx = kernel_float32(x)
    want = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=device).copy_(x)  # x's own layout
    F.elu(want, alpha, inplace=True)
    out = ELU(alpha, inplace=True)(x) if module else ops.elu(x, alpha, inplace=True)
    assert out is x
    close(x, want, approx)
    if alpha >= 0 and x.numel():  # with a gradient: a non-leaf, as nn.ELU(inplace=True) takes it
        a = x.detach().clone().requires_grad_()
        b = x.detach().clone().requires_grad_()
        g = ops.like(x).fill_(1.0)  # (aten's CPU loops agree on NaN only within one layout)
        ops.elu(a * 1.0, alpha, inplace=True).backward(g)
        F.elu(b * 1.0, alpha, inplace=True).backward(g)
        same(a.grad, b.grad, approx)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=tensors(dtypes=[torch.float32, torch.float64], max_dims=2), alpha=ALPHA,
       device=st.sampled_from(DEVICES), strict=st.booleans())
def test_compiled_agrees_with_eager(spec, alpha, device, strict):
    """The values, or with strict=True where no kernel computes x, the error (Dynamo raises it from the trace)."""
    x = make(spec, device)
    torch._dynamo.reset()
    refused = strict and ops.refusal(x, alpha, None)
    fn = torch.compile(lambda t: ops.elu(t, alpha, strict=strict) * 2 + 1, backend="aot_eager", fullgraph=not refused)
    if refused:
        for call in (fn, lambda t: ops.elu(t, alpha, strict=True)):
            with pytest.raises(refused[0], match=re.escape(refused[1])):
                call(x)
        return
    same(fn(x), (reference(x, alpha) if strict else F.elu(x, alpha)) * 2 + 1, kernel_float32(x) and strict)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), alpha=ALPHA, device=st.sampled_from(DEVICES),
       dtype=st.sampled_from([torch.bfloat16, torch.float16]))
def test_autocast_needs_no_change(seed, alpha, device, dtype):
    """Under autocast, the swapped model's ELU runs in its input's dtype as nn.ELU's does: the same outputs
    and gradients (16-bit: bit for bit)."""
    if device == "cpu" and dtype == torch.float16:
        dtype = torch.bfloat16  # CPU autocast's lower precision is bfloat16
    torch.manual_seed(seed)
    ref = nn.Sequential(nn.Linear(8, 16), nn.ELU(alpha), nn.Linear(16, 4)).to(device)
    ours = swap_elu(nn.Sequential(nn.Linear(8, 16), nn.ELU(alpha), nn.Linear(16, 4)).to(device))
    ours.load_state_dict(ref.state_dict())
    xb = torch.randn(5, 8, device=device)
    outs = []
    for model in (ref, ours):
        with torch.autocast(device, dtype=dtype):
            out = model(xb)
        out.float().square().sum().backward()
        outs.append(out)
    same(outs[1], outs[0], False)
    for a, b in zip(ours.parameters(), ref.parameters()):
        same(a.grad, b.grad, False)


# ---------------------------------------------------------------- bad inputs


def bad_calls(x: torch.Tensor):
    """(name, call, the exception type, words the message must hold) of each bad call on x."""
    refused = ops.refusal(x, 1.0, None)
    calls = [
        ("alpha a string", lambda: ops.elu(x, "1.0"), TypeError, "alpha must be a real number .* got str"),
        ("alpha None, module", lambda: ELU(None)(x), TypeError, "alpha must be a real number .* got NoneType"),
        ("unknown variant, module", lambda: ELU(variant="no_such_step"), ValueError, "unknown variant 'no_such_step'"),
        ("elu_backward shapes, op", lambda: torch.ops.elu_study.elu_backward(x.new_ones(x.numel() + 1), x, 1.0, True),
         ValueError, r"result has shape \(.*\) but grad_output has shape"),
    ]
    if refused:
        calls.append(("strict without a kernel", lambda: ELU(strict=True, inplace=True)(x), (TypeError, ValueError),
                      "no study kernel computes|alpha must be finite"))
    if x.numel():
        calls.append(("in place, negative alpha, a gradient",
                      lambda: ops.elu(x.detach().clone().requires_grad_() * 1.0, -0.5, inplace=True), RuntimeError,
                      "negative slope"))
    return calls


@EXAMPLES
@given(spec=tensors(), device=st.sampled_from(DEVICES))
def test_bad_inputs_name_the_problem_and_leave_the_input(spec, device):
    x = make(spec, device)
    before = x.clone()
    for _name, call, error, words in bad_calls(x):
        with pytest.raises(error, match=words):
            call()
        torch.testing.assert_close(x, before, rtol=0, atol=0, equal_nan=True)  # intact
        same(ops.elu(x, 0.5), reference(x, 0.5), kernel_float32(x))  # and the next call works
