"""The harness: every entry checked, then timed in rounds that interleave every entry (so that a drift of the
GPU's clocks or temperature touches every entry alike), in one process."""

import functools
import warnings
from dataclasses import asdict
from typing import Callable

import msgspec
import torch
import torch.nn.functional as F
from tqdm import tqdm

from elu_study.core.check import INPUT_SCALE, check_elu
from elu_study.core import derived, exhaustive, schema
from elu_study.core.entries import ALPHA, DTYPES16, Entry, resolve
from elu_study.core.hardware import SHAPE, gpu_spec, provenance
from elu_study.core.sass import inspect_variant
from elu_study.core.timing import REP_MS, WARMUP_MS, Sustained, time_interleaved, time_sustained


def elu_fn(entry: Entry) -> Callable:
    """(x, alpha, out) -> out for an entry, so that checks can poison the output."""
    if entry.mode not in ("", "in_place"):
        raise ValueError(f"{entry.name}: 16-bit storage is checked on every bit pattern (core.exhaustive), not here")
    if entry.variant:
        module = entry.build()
        if entry.mode == "in_place":
            return lambda x, alpha, out: module.elu(out.copy_(x), alpha, out=out)
        return lambda x, alpha, out: module.elu(x, alpha, out=out)
    calls = {
        "F.elu": lambda x, alpha, out: out.copy_(F.elu(x, alpha)),
        "torch.compile(F.elu)": lambda x, alpha, out: out.copy_(_compiled_elu()(x, alpha)),
        "F.elu_": lambda x, alpha, out: F.elu_(out.copy_(x), alpha),
        "triton": lambda x, alpha, out: triton_module().elu(x, alpha, out=out),
    }
    if entry.name not in calls:
        raise ValueError(f"{entry.name} computes no ELU")
    return calls[entry.name]


@functools.cache
def _compiled_elu():
    # One wrapper per process: a new torch.compile wrapper is a new backend, which dynamo compiles anew.
    return torch.compile(F.elu)


def timed_call(entry: Entry, x, y, cache: dict | None = None) -> Callable[[], object]:
    """The exact call that is timed (and profiled); a batch's entries share 16-bit tensors and grads via ``cache``."""
    cache = {} if cache is None else cache
    if entry.mode in DTYPES16:
        dtype = getattr(torch, entry.mode)
        if dtype not in cache:  # x rounded once, a grad drawn like x, an output
            cache[dtype] = (x.to(dtype), grad_tensor(x, dtype), torch.empty(x.shape, device=x.device, dtype=dtype))
        return _timed_streams(entry, *cache[dtype])
    if entry.direction == "backward":  # grad and x in, y out (torch.add moves the same three streams)
        if "grad" not in cache:
            cache["grad"] = grad_tensor(x)
        return _timed_streams(entry, x, cache["grad"], y)
    if entry.variant:
        module = entry.build()
        if entry.mode == "in_place":
            buf = x.clone()  # its own buffer, like F.elu_'s: the shared x is never modified
            return lambda: module.elu(buf, ALPHA, out=buf)
        return lambda: module.elu(x, ALPHA, out=y)
    if entry.name == "copy_":
        return lambda: y.copy_(x)
    if entry.name == "F.elu":
        return lambda: F.elu(x, ALPHA)  # allocates, as the original model does; the caching allocator makes that free
    if entry.name == "torch.compile(F.elu)":
        compiled = _compiled_elu()
        return lambda: compiled(x, ALPHA)
    if entry.name == "F.elu_":
        # Its own buffer; each call applies ELU to the last output: same bytes, negatives stay normal (-2/k).
        buf = x.clone()
        return lambda: F.elu_(buf, ALPHA)
    if entry.name == "triton":
        elu = triton_module().elu
        return lambda: elu(x, ALPHA, out=y)
    if entry.name == "read_only":
        return lambda: x.sum()
    if entry.name == "write_only":
        return lambda: y.zero_()
    raise ValueError(f"unknown entry {entry.name}")


def grad_tensor(x, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A backward's grad: randn shaped like x, in ``dtype``, from seed 4321."""
    gen = torch.Generator(device=x.device).manual_seed(4321)
    return torch.randn(x.shape, device=x.device, generator=gen, dtype=dtype)


def _timed_streams(entry: Entry, xh, gh, yh) -> Callable[[], object]:
    """A 16-bit or float32 backward row's call on the batch's tensors."""
    if entry.variant:
        module = entry.build()
        if entry.direction == "backward":
            return lambda: module.elu_backward(gh, xh, ALPHA, False, out=yh)
        return lambda: module.elu(xh, ALPHA, out=yh)
    calls = {
        "F.elu": lambda: F.elu(xh, ALPHA),
        "torch.compile(F.elu)": lambda: _compiled_elu()(xh, ALPHA),
        "copy_": lambda: yh.copy_(xh),
        "torch.add": lambda: torch.add(xh, gh, out=yh),
        "aten.elu_backward": lambda: torch.ops.aten.elu_backward(gh, ALPHA, 1, 1, False, xh),
        "triton": lambda: triton_module().elu(xh, ALPHA, out=yh),
    }
    kind = entry.name.removesuffix(f" {entry.mode}")  # a library row's call: "F.elu", "torch.add", ...
    if kind not in calls:
        raise ValueError(f"unknown entry {entry.name}")
    return calls[kind]


def triton_module():
    """elu_study.core.triton_elu, imported on first use: triton is optional."""
    from elu_study.core import triton_elu  # noqa: PLC0415

    return triton_elu


# Warnings off (Inductor and friends may warn on first use; results do not depend on it): ``with quiet(): ...``
quiet = functools.partial(warnings.catch_warnings, action="ignore")


def input_tensor(shape=SHAPE):
    """The one input every timing and profile uses: randn scaled so both branches run, drawn once."""
    gen = torch.Generator(device="cuda").manual_seed(1234)
    return torch.randn(shape, device="cuda", generator=gen).mul_(INPUT_SCALE)


def module_of(entry: Entry):
    """What has the entry's elu(x, alpha, out=) (and elu_backward): its build, or the Triton peer's module."""
    return entry.build() if entry.variant else triton_module()


def check_entry(entry: Entry, row: schema.Row, shape, trials: int) -> None:
    """An entry's check: float32 forward vs float64, float32 backward vs aten, 16-bit on every bit pattern."""
    if entry.mode in DTYPES16:
        if entry.direction == "backward" and entry.variant:
            row.exhaustive = exhaustive.check_backward(entry.build(), entry.mode, exhaustive.alphas())
        elif entry.direction == "forward" and (entry.variant or entry.name.startswith("triton")):
            row.exhaustive = exhaustive.check_patterns(module_of(entry), entry.mode, exhaustive.alphas())
    elif entry.direction == "backward" and entry.variant:
        x = input_tensor(shape)
        row.check = exhaustive.check_backward32(entry.build(), x, grad_tensor(x), ALPHA)
        del x
        torch.cuda.empty_cache()
    elif entry.checked:
        row.check = check_elu(elu_fn(entry), shape=shape, alpha=ALPHA, trials=trials).to_dict()


def measure(entries, *, shape=SHAPE, trials: int = 3, rounds: int = 5, progress: bool = False,
            sustained=(), check: bool = True, sass: bool = True) -> dict:
    """Check every entry (``check``: False where the job checked them its own way) and read its SASS (``sass``), then
    time them all in interleaved rounds, then each of ``sustained`` alone (``time_sustained``); a results record."""
    entries = resolve(entries)
    rows = {}
    read: dict[tuple, dict] = {}  # SASS by build
    with quiet():
        for entry in tqdm(entries, desc="checking", unit="entry", disable=not progress):
            row = schema.Row(name=entry.name, kind=entry.kind, what=entry.what, base=entry.base, flags=list(entry.flags),
                             timing={}, check=None, sass=None, mode=entry.mode, dtype=entry.dtype,
                             direction=entry.direction, exhaustive=None)  # its parts plain dicts, checked on read
            if check:
                check_entry(entry, row, shape, trials)
            if sass and entry.variant and not entry.variant.startswith("peers/"):  # a library's holds its own
                key = (entry.variant, entry.flags)  # entries that call one build another way share its SASS
                if key not in read:
                    read[key] = inspect_variant(entry.build()).to_dict()
                row.sass = read[key]
            rows[entry.name] = row
        torch.cuda.empty_cache()
        x = input_tensor(shape)
        y, cache = torch.empty_like(x), {}
        calls = {e.name: timed_call(e, x, y, cache) for e in entries}
        for name, timing in time_interleaved(calls, rounds=rounds, progress=progress).items():
            rows[name].timing = timing
        for entry in tqdm(resolve(sustained), desc="timing (sustained)", unit="entry", disable=not progress):
            rows[entry.name].timing["sustained"] = time_sustained(calls[entry.name])
        del x, y, calls, cache
        torch.cuda.empty_cache()
    record = {"provenance": provenance()}
    spec = gpu_spec(record["provenance"]["gpu"])
    record |= {
        "problem": {"shape": list(shape), "dtype": "float32", "alpha": ALPHA, "numel": shape[0] * shape[1]},
        "peak_bytes_per_s": spec.peak_bytes_per_s if spec else None,
        "peak_source": f"{spec.label} {spec.source}" if spec else None,
        "method": {"trials": trials, "rounds": rounds, "warmup_ms": WARMUP_MS, "rep_ms": REP_MS}
        | ({"sustained": asdict(Sustained())} if sustained else {}),
        "rows": [msgspec.structs.asdict(row) for row in rows.values()],
    }
    return derived.annotate(record)


