"""What every call of a build's ops must keep (``strategies`` draws the calls), for every op in ``core.ops.OPS``:
each result is PyTorch's within ``check.ATOL``/``RTOL`` (16-bit: bit for bit) and none is left poisoned; the poisoned
guard bands around an output, and each input with its guard bands, keep their bits; a bad call raises the binding's
documented error and the next call still works. test_fuzz_harness.py tests all this on the CPU; test_fuzz.py runs it on
the GPU. Test-only, beside the tests: it needs ``hypothesis`` (the test extra), which the package does not."""

from __future__ import annotations

import math
import re
from typing import Callable

import torch

from elu_study.core.check import ATOL, RTOL
from elu_study.core.ops import OPS, OpSpec
from strategies import BadCall, Case, Layout, Values, extent, storage_index

POISON = 0x7FA5A5A5  # the int32 bits of a signalling NaN that no kernel computes from these inputs
POISON16 = 0x7FA5  # its 16-bit half: a NaN in float16 and bfloat16 alike, never a result (results' NaNs are 0x7FFF)
GUARD = 4096  # poisoned elements on each side of every output, and random ones around every input


def _synchronize(t: torch.Tensor) -> None:  # so that an asynchronous fault shows up in the call that made it
    if t.is_cuda:
        torch.cuda.synchronize(t.device)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16)


def _poison(t: torch.Tensor) -> int:
    return POISON if t.element_size() == 4 else POISON16


def make_input(shape, layout: Layout, vals: Values, device, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(buffer, view): random values in a buffer GUARD larger on each side, the input a strided view of it; a
    16-bit dtype rounds the float32 values (specials included) once."""
    numel, start = math.prod(shape), GUARD + layout.offset
    gen = torch.Generator(device=device).manual_seed(vals.seed)
    buffer = torch.randn(start + extent(shape, layout.strides) + GUARD, device=device, generator=gen).mul_(vals.scale)
    for index, value in vals.specials if numel else ():
        buffer[storage_index(shape, layout.strides, start, index % numel)] = value
    buffer = buffer.to(dtype)
    return buffer, buffer.as_strided(shape, layout.strides, start)


def poisoned(n: int, device, dtype=torch.float32) -> torch.Tensor:
    t = torch.empty(n, dtype=dtype, device=device)
    return _bits(t).fill_(_poison(t)).view(dtype)


def _check_values(result: torch.Tensor, expected: torch.Tensor, compare: bool = True) -> None:
    """float32 within atol/rtol of PyTorch (the steps' formulas are not PyTorch's); 16-bit bit for bit."""
    bits = _bits(result.contiguous())
    if unwritten := int((bits == _poison(result)).sum()):
        raise AssertionError(f"{unwritten} of {result.numel()} output elements were never written (still poison)")
    if not compare:
        return
    if result.dtype == torch.float32:
        bad = ~torch.isclose(result, expected, rtol=RTOL, atol=ATOL, equal_nan=True)
    else:
        bad = bits != _bits(expected.contiguous())
    if bool(bad.any()):
        first = bad.flatten().nonzero().flatten()[:5]
        raise AssertionError(f"{int(bad.sum())} of {result.numel()} {result.dtype} elements differ from the reference "
                             f"(float32: beyond atol=rtol={ATOL:g}; 16-bit: in their bits); first at flat indices "
                             f"{first.tolist()}: got {result.flatten()[first].tolist()}, "
                             f"expected {expected.flatten()[first].tolist()}")


def _check_bits(before: torch.Tensor, after: torch.Tensor, what: str) -> None:
    if not torch.equal(before, after):
        changed = (before != after).nonzero().flatten()
        raise AssertionError(f"{what}: {changed.numel()} element(s) changed, first at buffer indices {changed[:5].tolist()}")


def _check_guards(before: torch.Tensor, now: torch.Tensor, start: int, numel: int, what: str) -> None:
    _check_bits(before[:start], now[:start], f"guard band before {what}")
    _check_bits(before[start + numel :], now[start + numel :], f"guard band after {what}")


def check_case(call: Callable, op: OpSpec, case: Case, device, compare: bool = True) -> None:
    """Run a drawn case through ``call`` (the module's op) and assert every property. ``compare=False`` (a build
    that computes no ELU, such as a copy kernel) leaves out the comparison with the reference, and only that."""
    device = torch.device(device)
    buffers, inputs = zip(*(make_input(case.shape, lay, vals, device, case.dtype)
                            for lay, vals in zip(case.layouts, case.values)))
    before = [_bits(b).clone() for b in buffers]
    expected = op.expected([x.clone() for x in inputs], case.alpha)
    numel, out_start = case.numel, GUARD + case.out_offset
    out_buffer = out = None
    if case.out == "given":
        out_buffer = poisoned(out_start + numel + GUARD, device, case.dtype)
        out = out_buffer[out_start : out_start + numel].view(case.shape)
    elif case.out == "in_place":
        out = inputs[op.in_place]  # holds the input's values, which the op reads: it cannot be poisoned
    result = call(*inputs, case.alpha) if case.out == "none" and case.omit_out else call(*inputs, case.alpha, out=out)
    _synchronize(inputs[0])
    if not isinstance(result, torch.Tensor):
        raise AssertionError(f"returned {type(result).__name__}, not a tensor")
    if (result.dtype, result.device, tuple(result.shape)) != (case.dtype, inputs[0].device, case.shape):
        raise AssertionError(f"returned {result.dtype} {tuple(result.shape)} on {result.device} for an input of "
                             f"{case.dtype} {case.shape} on {inputs[0].device}")
    if out is not None:
        assert result.data_ptr() == out.data_ptr() and result.stride() == out.stride(), "out= given but not returned"
    else:
        assert result.is_contiguous(), "fresh output not contiguous"
        for b in buffers if numel else ():
            assert not 0 <= result.data_ptr() - b.data_ptr() < b.numel() * b.element_size(), "fresh output aliases an input"
    _check_values(result, expected, compare)
    if out_buffer is not None:
        bits = _bits(out_buffer)
        _check_guards(torch.full_like(bits, _poison(out_buffer)), bits, out_start, numel, "out")
    for i, (buffer, snapshot) in enumerate(zip(buffers, before)):
        if case.out == "in_place" and i == op.in_place:
            _check_guards(snapshot, _bits(buffer), GUARD + case.layouts[i].offset, numel, f"in-place {op.inputs[i]}")
        else:
            _check_bits(snapshot, _bits(buffer), f"input {op.inputs[i]} and guard bands")


def rules_for(op: OpSpec) -> dict[str, tuple[type, str]]:
    """rule -> (exception type, message pattern): the binding's documented refusals. A message names the op and the
    tensor (an input rule: any input), and compares it with the first input (elu's "input", else "grad_output")."""
    first = op.message_names[0]
    mismatch = lambda said: rf"{said} but {first} {said}"
    rules = {"alpha": (ValueError, "alpha must be finite"), "out layout": (ValueError, "out must be contiguous"),
             "overlap": (RuntimeError, "out shares memory with")}
    for who, subject, like in (("input", "(" + "|".join(op.message_names) + ")", first), ("out", "out", "the input")):
        for aspect, kind, said in (("device", ValueError, "must be a CUDA tensor"),
                                   ("dtype", TypeError, rf"must be (float32|\w+ like {like})"),
                                   ("device index", ValueError, mismatch("is on .*")),
                                   ("shape", ValueError, mismatch(r"has shape \(.*\)"))):
            rules[f"{who} {aspect}"] = (kind, f"{subject} {said}")
    return {rule: (kind, f"{op.name}: {pattern}") for rule, (kind, pattern) in rules.items()}


def violations(x: torch.Tensor, out: torch.Tensor | None, alpha: float, device: torch.device,
               others: tuple[torch.Tensor, ...] = (), dtypes: tuple[torch.dtype, ...] = (torch.float32,)) -> set[str]:
    """The documented rules a call breaks, read from the tensors themselves (not from what was meant): ``x`` is the
    first input, ``others`` the further ones, ``dtypes`` what the op takes (``core.ops.accepted_dtypes``)."""
    on = lambda t: t.device.type == device.type
    span = lambda t: (t.data_ptr(), t.data_ptr() + extent(t.shape, t.stride()) * t.element_size())
    taken = lambda t: t.dtype in dtypes and (t.dtype == x.dtype or x.dtype not in dtypes)
    rules = {"input device": not all(map(on, (x, *others))), "input dtype": not all(map(taken, (x, *others))),
             "input device index": any(on(x) and on(t) and t.device != x.device for t in others),
             "input shape": any(t.shape != x.shape for t in others), "alpha": not math.isfinite(alpha)}
    if out is not None:
        rules |= {"out device": not on(out), "out dtype": not taken(out),
                  "out device index": on(x) and on(out) and out.device != x.device,
                  "out shape": out.shape != x.shape, "out layout": not out.is_contiguous()}
    broken = {rule for rule, is_broken in rules.items() if is_broken}
    if out is not None and out.numel() and not broken:
        (o0, o1), spans = span(out), [(span(t), t.is_contiguous()) for t in (x, *others) if t.numel()]
        if any(o0 < x1 and x0 < o1 and not (o0 == x0 and exact) for (x0, x1), exact in spans):
            broken.add("overlap")
    return broken


def make_bad_call(bad: BadCall, device, foreign, other=None) -> tuple[tuple[torch.Tensor, ...], torch.Tensor | None]:
    """(inputs, out) of a drawn bad call, each of its drawn dtype, place and shape; out may share x's memory."""
    where = {"device": torch.device(device), "foreign": torch.device(foreign), "meta": torch.device("meta"),
             "other": other and torch.device(other)}
    gen = torch.Generator().manual_seed(bad.seed)
    rand = lambda n, dtype, place: (torch.randn(n, generator=gen) * 4).to(dtype=dtype, device=where[place])
    numel = math.prod(bad.shape)
    base = rand(numel + (bad.out == "overlap"), bad.x_dtype, bad.x_device)
    x = base[:numel].view(bad.shape)
    others = tuple(rand(math.prod(o.shape), o.dtype, o.device).view(o.shape) for o in bad.others)
    out = x if bad.out == "alias" else None
    if bad.out == "overlap":  # x and out both views of one buffer, one element apart
        out = base[1:].view(bad.shape)
    elif bad.out == "fresh":  # not contiguous: every other element of a buffer twice as long
        spread = 1 if bad.out_contiguous else 2
        out = torch.empty((*bad.out_shape[:-1], spread * bad.out_shape[-1]), dtype=bad.out_dtype,
                          device=where[bad.out_device])[..., ::spread]
    return (x, *others), out


def check_bad_call(call: Callable, bad: BadCall, device, foreign, other=None, compare: bool = True,
                   op: OpSpec | None = None, dtypes: tuple[torch.dtype, ...] = (torch.float32,)) -> None:
    """The call either works and is right, or raises one of the documented errors of the rules it breaks.
    ``op`` (default elu) is the op ``call`` runs; draw ``bad`` with ``strategies.bad_calls(op=op)``."""
    op = op or OPS["elu"]
    device = torch.device(device)
    inputs, out = make_bad_call(bad, device, foreign, other)
    if len(inputs) != len(op.inputs):
        raise ValueError(f"{op.name} takes {len(op.inputs)} inputs; draw the bad calls with bad_calls(op=...)")
    broken = violations(inputs[0], out, bad.alpha, device, inputs[1:], dtypes)
    expected = None if broken else op.expected([t.clone() for t in inputs], bad.alpha)
    try:
        result = call(*inputs, bad.alpha, out=out)
        _synchronize(inputs[0])
    except Exception as err:  # noqa: BLE001 - which error, and with which message, is the property
        allowed = [rules_for(op)[rule] for rule in sorted(broken)]
        if not any(isinstance(err, kind) and re.search(pattern, str(err)) for kind, pattern in allowed):
            raise AssertionError(f"the call breaks {sorted(broken) or 'no rule'}, so it must raise one of "
                                 f"{[(k.__name__, p) for k, p in allowed]}; it raised {type(err).__name__}: {err}") from err
        return
    if broken:
        raise AssertionError(f"the call breaks {sorted(broken)} but returned instead of raising")
    assert out is None or result.data_ptr() == out.data_ptr(), "out= given but not returned"
    assert tuple(result.shape) == bad.shape
    _check_values(result, expected, compare)


def check_still_works(call: Callable, device, seed: int, compare: bool = True, op: OpSpec | None = None) -> None:
    """A valid call after whatever came before: the context is alive and the results are right."""
    op = op or OPS["elu"]
    gen = torch.Generator(device=device).manual_seed(seed)
    inputs = [torch.randn(1 + seed % 5003, device=device, generator=gen).mul_(4) for _ in op.inputs]
    result = call(*inputs, 0.75, out=poisoned(inputs[0].numel(), device))
    _synchronize(inputs[0])
    _check_values(result, op.expected([t.clone() for t in inputs], 0.75), compare)
