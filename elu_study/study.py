"""The harness: every step and every baseline checked and timed the same way, in one process."""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from typing import Callable

from .hardware import SHAPE, floor_ms, gpu_spec, provenance, tbps

ALPHA = 1.0


@dataclass(frozen=True)
class Entry:
    """One row of the study: a step (a kernel build) or a baseline (something PyTorch does)."""

    name: str
    kind: str  # "step" or "baseline"
    what: str
    variant: str | None = None
    flags: tuple[str, ...] = ()
    checked: bool = True  # copy_ computes no ELU

    def build(self):
        from .build import compile_variant

        return compile_variant(self.variant, extra_cuda_cflags=list(self.flags))


def _grid_stride_waves(waves: int, kind: str) -> Entry:
    return Entry(f"3_grid_stride_{waves}_waves", kind, f"float4 grid-stride, {waves} whole wave(s) x 512",
                 "3_grid_stride", (f"-DELU_GRID_WAVES={waves}",))


STEPS = (
    Entry("1_naive", "step", "scalar, 1 element/thread, 256 threads, expf", "1_naive"),
    Entry("2_float4", "step", "float4, 1 vector/thread, 256 threads, expf", "2_float4"),
    Entry("3_grid_stride", "step", "float4 grid-stride, 1152 x 512 (the seed's launch)", "3_grid_stride"),
    _grid_stride_waves(2, "step"),  # the fix the grid-stride notebook shows
    Entry("4_fast_math", "step", "step 2 with __expf, --use_fast_math", "4_fast_math"),
    Entry("5_streaming", "step", "2 float4/thread, 128 threads, __ldcs/__stcs, expm1f", "5_streaming"),
)
BASELINES = (
    Entry("copy_", "baseline", "y.copy_(x): the same bytes, no math (the measured roof)", checked=False),
    Entry("F.elu", "baseline", "PyTorch's ELU (the op being replaced)"),
    Entry("torch.compile(F.elu)", "baseline", "Inductor's generated Triton kernel"),
)
GRID_SWEEP = tuple(_grid_stride_waves(w, "sweep") for w in (1, 4, 8))  # 2 waves is a step above
# Step 5's launch and hints with step 2's expf: what expm1f's extra arithmetic costs.
ABLATIONS = (Entry("5_streaming_expf", "ablation", "step 5 with expf instead of expm1f", "5_streaming",
                   ("-DELU_STREAMING_OP=Expf",)),)
_ALL = (*BASELINES, *STEPS, *GRID_SWEEP, *ABLATIONS)
ENTRIES = {e.name: e for e in _ALL}
if len(ENTRIES) != len(_ALL):
    raise ValueError("elu_study.study: entry names must be unique")
KINDS = ("baseline", "step", "sweep", "ablation")


def builds(entries=None) -> list[tuple[str, tuple[str, ...]]]:
    """Every (variant, flags) that entries compile (default: the whole study), for build_all."""
    entries = ENTRIES.values() if entries is None else entries
    return sorted({(e.variant, e.flags) for e in entries if e.variant})


def elu_fn(entry: Entry) -> Callable:
    """(x, alpha, out) -> out for an entry, so that checks can poison the output."""
    import torch
    import torch.nn.functional as F

    if entry.variant:
        module = entry.build()
        return lambda x, alpha, out: module.elu(x, alpha, out=out)
    if entry.name == "F.elu":
        return lambda x, alpha, out: out.copy_(F.elu(x, alpha))
    if entry.name == "torch.compile(F.elu)":
        compiled = torch.compile(F.elu)
        return lambda x, alpha, out: out.copy_(compiled(x, alpha))
    raise ValueError(f"{entry.name} computes no ELU")


def timed_call(entry: Entry, x, y) -> Callable[[], object]:
    """The exact call that is timed: the kernel alone, its output preallocated where it can be."""
    import torch
    import torch.nn.functional as F

    if entry.variant:
        module = entry.build()
        return lambda: module.elu(x, ALPHA, out=y)
    if entry.name == "copy_":
        return lambda: y.copy_(x)
    if entry.name == "F.elu":
        return lambda: F.elu(x, ALPHA)  # allocates, as the original model does; the caching allocator makes that free
    if entry.name == "torch.compile(F.elu)":
        compiled = torch.compile(F.elu)
        return lambda: compiled(x, ALPHA)
    raise ValueError(f"unknown entry {entry.name}")


@dataclass
class Measurement:
    """What a live run measured for one entry, ready to be saved as a results row."""

    name: str
    kind: str
    what: str
    timing: dict
    check: dict | None = None
    near_zero_rel_err: dict | None = None
    sass: dict | None = None
    extra: dict = field(default_factory=dict)


@contextlib.contextmanager
def _quiet():
    # Inductor and friends may warn on first use; results do not depend on it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def measure(entries, *, shape=SHAPE, trials: int = 3, progress: bool = False) -> dict:
    """Check and time entries on the GPU; return a results record (see elu_study.results)."""
    import torch

    from .check import INPUT_SCALE, check_elu, near_zero_rel_error
    from .sass import inspect_variant
    from .timing import time_ms

    entries = [ENTRIES[e] if isinstance(e, str) else e for e in entries]
    numel = shape[0] * shape[1]
    rows = []
    iterator = entries
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(entries, desc="measuring", unit="entry")
    with _quiet():
        # One input for every timing, drawn once: randn scaled so both branches run.
        gen = torch.Generator(device="cuda").manual_seed(1234)
        x = torch.randn(shape, device="cuda", generator=gen).mul_(INPUT_SCALE)
        y = torch.empty_like(x)
        for entry in iterator:
            m = Measurement(entry.name, entry.kind, entry.what, timing={})
            if entry.checked:
                fn = elu_fn(entry)
                m.check = check_elu(fn, shape=shape, alpha=ALPHA, trials=trials).to_dict()
                m.near_zero_rel_err = near_zero_rel_error(fn, ALPHA)
            if entry.variant:
                report = inspect_variant(entry.build())
                m.sass = {"registers": report.registers, "local_bytes": report.local_bytes,
                          "access_bits": sorted(report.access_bits), "exponential": report.exponential}
            m.timing = time_ms(timed_call(entry, x, y)).to_dict()
            rows.append(m.__dict__)
        del x, y
        torch.cuda.empty_cache()
    prov = provenance()
    spec = gpu_spec(prov["gpu"])
    record = {
        "provenance": prov,
        "problem": {"shape": list(shape), "dtype": "float32", "alpha": ALPHA, "numel": numel},
        "peak_bytes_per_s": spec.peak_bytes_per_s if spec else None,
        "peak_source": f"{spec.label} {spec.source}" if spec else None,
        "rows": rows,
    }
    return annotate(record)


def annotate(record: dict) -> dict:
    """Derived columns for every row: TB/s, % of the datasheet floor, time over copy_."""
    numel = record["problem"]["numel"]
    peak = record.get("peak_bytes_per_s")
    roof = next((r["timing"]["median_ms"] for r in record["rows"] if r["name"] == "copy_"), None)
    record["floor_ms"] = floor_ms(numel, peak) if peak else None
    record["roof_ms"] = roof
    for row in record["rows"]:
        ms = row["timing"]["median_ms"]
        row["tbps"] = tbps(numel, ms)
        row["pct_of_peak"] = 100 * record["floor_ms"] / ms if peak else None
        row["x_copy"] = ms / roof if roof else None
    return record
