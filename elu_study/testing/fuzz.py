"""Property-based fuzzing of a build's ops: what every call must keep (strategies.py draws the calls).

The properties, for every op in ``elu_study.core.ops.OPS`` and any case ``strategies`` draws:

- every element of the result equals PyTorch's reference within ``check.ATOL``/``RTOL`` (NaN where
  the reference is NaN), and none still holds the poison the output was filled with;
- nothing outside the output is written: poisoned guard bands around it keep their exact bits;
- the inputs are unchanged, bit for bit, guard bands included, unless the op ran in place;
- a bad call (wrong dtype, device, shape or layout of an input or of ``out``, non-finite ``alpha``)
  raises the documented Python error, and the next call still works. For an op of several inputs
  (``elu_backward``), each input may break the rules, and they must agree in device and shape.

Nothing here needs a GPU: ``device`` is a parameter, so the harness itself is tested on the CPU
against fakes with planted faults (tests/test_fuzz_harness.py).
"""

from __future__ import annotations

import math
import re
from typing import Callable

import torch

from elu_study.core.check import ATOL, RTOL
from elu_study.core.ops import OPS, OpSpec
from elu_study.testing.strategies import BadCall, Case, Layout, Values, extent, storage_index

POISON = 0x7FA5A5A5  # the int32 bits of a signalling NaN that no kernel computes from these inputs
POISON16 = 0x7FA5  # its 16-bit half: a NaN in float16 and bfloat16 alike, never a result (results' NaNs are 0x7FFF)
GUARD = 4096  # poisoned elements on each side of every output, and random ones around every input


# ---------------------------------------------------------------- the forward property


def _synchronize(t: torch.Tensor) -> None:
    """Wait for the device's work, so that an asynchronous fault shows up in the call that made it."""
    if t.is_cuda:
        torch.cuda.synchronize(t.device)


def _generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16)


def _poison(t: torch.Tensor) -> int:
    return POISON if t.element_size() == 4 else POISON16


def make_input(shape, layout: Layout, vals: Values, device, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(buffer, view): random values in a buffer GUARD larger on each side, the input a strided view of it; a
    16-bit dtype rounds the float32 values (specials included) once."""
    numel = math.prod(shape)
    start = GUARD + layout.offset
    buffer = torch.randn(start + extent(shape, layout.strides) + GUARD, device=device,
                         generator=_generator(torch.device(device), vals.seed)).mul_(vals.scale)
    for index, value in vals.specials:
        if numel:
            buffer[storage_index(shape, layout.strides, start, index % numel)] = value
    buffer = buffer.to(dtype)
    return buffer, buffer.as_strided(shape, layout.strides, start)


def poisoned(n: int, device, dtype=torch.float32) -> torch.Tensor:
    if dtype == torch.float32:
        return torch.empty(n, dtype=torch.int32, device=device).fill_(POISON).view(torch.float32)
    return torch.empty(n, dtype=torch.int16, device=device).fill_(POISON16).view(dtype)


def _describe_mismatch(result: torch.Tensor, expected: torch.Tensor) -> str:
    r, e = result.reshape(-1).double(), expected.reshape(-1).double()
    nan_r, nan_e = torch.isnan(r), torch.isnan(e)
    close = torch.isclose(r, e, rtol=RTOL, atol=ATOL) | (nan_r & nan_e)
    bad = (~close).nonzero().flatten()
    first = bad[:5].tolist()
    return (f"{bad.numel()} of {r.numel()} elements differ from the reference beyond atol=rtol={ATOL:g}; "
            f"first at flat indices {first}: got {[r[i].item() for i in first]}, expected {[e[i].item() for i in first]}")


def _check_values(result: torch.Tensor, expected: torch.Tensor, compare: bool = True) -> None:
    """float32 within atol/rtol of PyTorch (the steps' formulas are not PyTorch's); 16-bit bit for bit, as the
    16-bit paths claim."""
    unwritten = int((_bits(result.contiguous()) == _poison(result)).sum().item())
    assert unwritten == 0, f"{unwritten} of {result.numel()} output elements were never written (still poison)"
    if not compare:
        return
    if result.dtype != torch.float32:
        differ = _bits(result.contiguous()) != _bits(expected.contiguous())
        if bool(differ.any()):
            first = differ.flatten().nonzero()[:5].flatten().tolist()
            raise AssertionError(f"{int(differ.sum())} of {result.numel()} {result.dtype} elements differ from "
                                 f"PyTorch's bits; first at flat indices {first}")
        return
    same = torch.isclose(result, expected, rtol=RTOL, atol=ATOL, equal_nan=True)
    if not bool(same.all()):
        raise AssertionError(_describe_mismatch(result, expected))


def _check_bits(before: torch.Tensor, after: torch.Tensor, what: str) -> None:
    if not torch.equal(before, after):
        changed = (before != after).nonzero().flatten()
        raise AssertionError(f"{what}: {changed.numel()} element(s) changed, first at buffer indices {changed[:5].tolist()}")


def check_case(call: Callable, op: OpSpec, case: Case, device, compare: bool = True) -> None:
    """Run one drawn case through ``call`` (the module's op) and assert every property; raise AssertionError.

    ``compare=False`` (a build that computes no ELU, such as a copy kernel) leaves out the comparison
    with the reference; every other property holds all the same."""
    device = torch.device(device)
    buffers, inputs = zip(*(make_input(case.shape, lay, vals, device, case.dtype)
                            for lay, vals in zip(case.layouts, case.values)))
    before = [_bits(b).clone() for b in buffers]
    expected = op.expected([x.clone() for x in inputs], case.alpha)
    numel = case.numel
    out_start = GUARD + case.out_offset
    out_buffer = out = None
    if case.out == "given":
        out_buffer = poisoned(out_start + numel + GUARD, device, case.dtype)
        out = out_buffer[out_start : out_start + numel].view(case.shape)
    elif case.out == "in_place":
        out = inputs[op.in_place]  # holds the input's values, which the op reads: it cannot be poisoned

    if case.out == "none" and case.omit_out:
        result = call(*inputs, case.alpha)
    else:
        result = call(*inputs, case.alpha, out=out)
    _synchronize(inputs[0])

    assert isinstance(result, torch.Tensor), f"returned {type(result).__name__}, not a tensor"
    assert result.dtype == case.dtype and result.device == inputs[0].device, f"returned {result.dtype} on {result.device}"
    assert tuple(result.shape) == case.shape, f"returned shape {tuple(result.shape)} for input shape {case.shape}"
    if out is not None:
        assert result.data_ptr() == out.data_ptr() and result.stride() == out.stride(), "out= given but not returned"
    else:
        assert result.is_contiguous(), "a fresh output must be contiguous"
        if numel:
            for b in buffers:
                lo, hi = b.data_ptr(), b.data_ptr() + b.numel() * b.element_size()
                assert not lo <= result.data_ptr() < hi, "a fresh output aliases an input"

    _check_values(result, expected, compare)
    if out_buffer is not None:
        bits = _bits(out_buffer)
        _check_bits(torch.full_like(bits[:out_start], _poison(out_buffer)), bits[:out_start], "guard band before out")
        tail = bits[out_start + numel :]
        _check_bits(torch.full_like(tail, _poison(out_buffer)), tail, "guard band after out")
    for i, (buffer, snapshot) in enumerate(zip(buffers, before)):
        now = _bits(buffer)
        name = op.inputs[i]
        if case.out == "in_place" and i == op.in_place:
            start = GUARD + case.layouts[i].offset
            _check_bits(snapshot[:start], now[:start], f"guard band before in-place {name}")
            _check_bits(snapshot[start + numel :], now[start + numel :], f"guard band after in-place {name}")
        else:
            _check_bits(snapshot, now, f"input {name} (and its guard bands)")


# ---------------------------------------------------------------- bad calls


def rules_for(op: OpSpec) -> dict[str, tuple[type, str]]:
    """(exception type, what the message says): the binding's documented refusals for one op.
    Messages name the op, and compare every tensor with the first input (``elu``'s "input",
    ``elu_backward``'s "grad_output")."""
    name, first = op.name, op.message_names[0]
    any_input = "(" + "|".join(op.message_names) + ")"
    rules = {
        "input device": (ValueError, rf"{name}: {any_input} must be a CUDA tensor"),
        "input dtype": (TypeError, rf"{name}: {any_input} must be (float32|\w+ like {first})"),
        "alpha": (ValueError, rf"{name}: alpha must be finite"),
        "out device": (ValueError, rf"{name}: out must be a CUDA tensor"),
        "out dtype": (TypeError, rf"{name}: out must be (float32|\w+ like the input)"),
        "out device index": (ValueError, rf"{name}: out is on .* but {first} is on"),
        "out shape": (ValueError, rf"{name}: out has shape \(.*\) but {first} has shape \(.*\)"),
        "out layout": (ValueError, rf"{name}: out must be contiguous"),
        "overlap": (RuntimeError, rf"{name}: out shares memory with (the|an) input"),
    }
    if len(op.inputs) > 1:
        rules["input device index"] = (ValueError, rf"{name}: {any_input} is on .* but {first} is on")
        rules["input shape"] = (ValueError, rf"{name}: {any_input} has shape \(.*\) but {first} has shape \(.*\)")
    return rules


RULES = rules_for(OPS["elu"])  # elu's


def _span(t: torch.Tensor) -> tuple[int, int]:
    return t.data_ptr(), t.data_ptr() + extent(t.shape, t.stride()) * t.element_size()


def violations(x: torch.Tensor, out: torch.Tensor | None, alpha: float, device: torch.device,  # noqa: C901 - one rule per branch
               others: tuple[torch.Tensor, ...] = (), dtypes: tuple[torch.dtype, ...] = (torch.float32,)) -> set[str]:
    """The documented rules a call breaks, read from the tensors themselves (not from what was meant).
    ``x`` is the first input; ``others`` the op's further inputs (elu_backward's x after grad_output);
    ``dtypes`` what the op takes (``core.ops.accepted_dtypes``)."""
    broken = set()
    on_device = lambda t: t.device.type == device.type  # noqa: E731
    for t in (x, *others):
        if not on_device(t):
            broken.add("input device")
        if t.dtype not in dtypes:
            broken.add("input dtype")
    for t in others:
        if t.dtype in dtypes and x.dtype in dtypes and t.dtype != x.dtype:
            broken.add("input dtype")
        if on_device(x) and on_device(t) and t.device != x.device:
            broken.add("input device index")
        if t.shape != x.shape:
            broken.add("input shape")
    if not math.isfinite(alpha):
        broken.add("alpha")
    if out is not None:
        if not on_device(out):
            broken.add("out device")
        if out.dtype not in dtypes or (x.dtype in dtypes and out.dtype != x.dtype):
            broken.add("out dtype")
        if on_device(x) and on_device(out) and out.device != x.device:
            broken.add("out device index")
        if out.shape != x.shape:
            broken.add("out shape")
        if not out.is_contiguous():
            broken.add("out layout")
        if not broken and out.numel():
            for t in (x, *others):
                if not t.numel():
                    continue
                (o0, o1), (x0, x1) = _span(out), _span(t)
                exact = o0 == x0 and t.is_contiguous()
                if not exact and o0 < x1 and x0 < o1:
                    broken.add("overlap")
    return broken


def make_bad_call(bad: BadCall, device, foreign, other=None):
    """(x, out) for a drawn bad call; out may share x's memory (alias, overlap)."""
    where = {"device": torch.device(device), "foreign": torch.device(foreign), "meta": torch.device("meta"),
             "other": other and torch.device(other)}
    gen = torch.Generator().manual_seed(bad.seed)
    numel = math.prod(bad.shape)
    x_dev = where[bad.x_device]
    if bad.out == "overlap":  # x and out both views of one buffer, one element apart
        base = (torch.randn(numel + 1, generator=gen) * 4).to(dtype=bad.x_dtype, device=x_dev)
        x = base[:numel].view(bad.shape)
        return x, base[1:].view(bad.shape)
    x = (torch.randn(bad.shape, generator=gen) * 4).to(dtype=bad.x_dtype, device=x_dev)
    if bad.out == "none":
        return x, None
    if bad.out == "alias":
        return x, x
    out_dev = where[bad.out_device]
    if bad.out_contiguous:
        out = torch.empty(bad.out_shape, dtype=bad.out_dtype, device=out_dev)
    else:  # every other element of a buffer twice as long
        out = torch.empty((*bad.out_shape[:-1], 2 * bad.out_shape[-1]), dtype=bad.out_dtype, device=out_dev)[..., ::2]
    return x, out


def make_other_inputs(bad: BadCall, device, foreign, other=None) -> tuple[torch.Tensor, ...]:
    """The op's further inputs of a drawn bad call (random values, their own dtype, place and shape)."""
    where = {"device": torch.device(device), "foreign": torch.device(foreign), "meta": torch.device("meta"),
             "other": other and torch.device(other)}
    gen = torch.Generator().manual_seed(bad.seed + 1)
    return tuple((torch.randn(o.shape, generator=gen) * 4).to(dtype=o.dtype, device=where[o.device]) for o in bad.others)


def check_bad_call(call: Callable, bad: BadCall, device, foreign, other=None, compare: bool = True,
                   op: OpSpec | None = None, dtypes: tuple[torch.dtype, ...] = (torch.float32,)) -> None:
    """The call either works and is right, or raises one of the documented errors of the rules it breaks.
    ``op`` (default elu) is the op ``call`` runs; its inputs are the drawn first one and ``bad.others``."""
    op = op or OPS["elu"]
    device = torch.device(device)
    x, out = make_bad_call(bad, device, foreign, other)
    others = make_other_inputs(bad, device, foreign, other)
    if len(others) != len(op.inputs) - 1:
        raise ValueError(f"{op.name} takes {len(op.inputs)} inputs; draw the bad calls with bad_calls(op=...)")
    inputs = (x, *others)
    broken = violations(x, out, bad.alpha, device, others, dtypes)
    expected = op.expected([t.clone() for t in inputs], bad.alpha) if not broken else None
    try:
        result = call(*inputs, bad.alpha, out=out)
        _synchronize(x)
    except Exception as err:  # noqa: BLE001 - which error, and with which message, is the property
        if not broken:
            raise AssertionError(f"a valid call raised {type(err).__name__}: {err}") from err
        rules = rules_for(op)
        allowed = {rules[rule] for rule in broken}
        if not any(isinstance(err, kind) and re.search(pattern, str(err)) for kind, pattern in allowed):
            raise AssertionError(
                f"the call breaks {sorted(broken)}, so it must raise one of "
                f"{sorted((k.__name__, p) for k, p in allowed)}; it raised {type(err).__name__}: {err}"
            ) from err
        return
    assert not broken, f"the call breaks {sorted(broken)} but returned instead of raising"
    if out is not None:
        assert result.data_ptr() == out.data_ptr(), "out= given but not returned"
    assert tuple(result.shape) == bad.shape
    _check_values(result, expected, compare)


def check_still_works(call: Callable, device, seed: int, compare: bool = True, op: OpSpec | None = None) -> None:
    """A valid call after whatever came before: the context is alive and the results are right."""
    op = op or OPS["elu"]
    device = torch.device(device)
    gen = _generator(device, seed)
    n = 1 + seed % 5003
    inputs = [torch.randn(n, device=device, generator=gen).mul_(4) for _ in op.inputs]
    out = poisoned(n, device)
    result = call(*inputs, 0.75, out=out)
    _synchronize(inputs[0])
    _check_values(result, op.expected([t.clone() for t in inputs], 0.75), compare)
