"""The harness: every step, ablation and baseline checked and timed the same way, in one process.

Each entry is measured once per run: checked first, then timed in rounds that interleave every
entry (round 1 times each entry once, then round 2, ...), so that a drift of the GPU's clocks or
temperature during the run touches every entry alike instead of whichever came last.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from typing import Callable

from .hardware import SHAPE, floor_ms, gpu_spec, provenance, tbps

ALPHA = 1.0


@dataclass(frozen=True)
class Entry:
    """One row of the study: a step (a kernel build), an ablation of one, or a baseline."""

    name: str
    kind: str  # "baseline", "step" or "ablation"
    what: str
    variant: str | None = None
    flags: tuple[str, ...] = ()
    checked: bool = True  # copies compute no ELU
    group: str = ""  # the question an ablation answers (see GROUPS)
    base: str | None = None  # the entry this one differs from by exactly one change

    def build(self):
        from .build import compile_variant

        return compile_variant(self.variant, extra_cuda_cflags=list(self.flags))


def _grid(name: str, what: str, *flags: str, group: str, base: str | None = None, kind: str = "ablation") -> Entry:
    return Entry(name, kind, what, "3_grid_stride", tuple(flags), group=group, base=base)


# Step 5's file with step 2's four choices, then each of step 5's changes alone.
_STEP2_CHOICES = {"OP": "Expf", "THREADS": "256", "VECS": "1", "HINTS": "0"}


def _from_step2(name: str, what: str, **change: str) -> Entry:
    knobs = {**_STEP2_CHOICES, **change}
    flags = tuple(f"-DELU_STREAMING_{k}={v}" for k, v in knobs.items())
    return Entry(name, "ablation", what, "5_streaming", flags, group="step5_one_change",
                 base="5_as_step_2" if change else "2_float4")


GROUPS = {
    "grid_waves": "grid-stride: how many whole waves (one change: the grid size)",
    "grid_one_change": "grid-stride at 2 whole waves: one change each",
    "step5_one_change": "step 2 plus one of step 5's changes",
    "step5_formula": "step 5 with step 2's formula",
}

BASELINES = (
    Entry("copy_", "baseline", "y.copy_(x): the same bytes, no math (the measured roof)", checked=False),
    Entry("copy_kernel", "baseline", "step 2's kernel with no math: the roof as a kernel ncu can profile",
          "2_float4", ("-DELU_FLOAT4_OP=Copy",), checked=False),
    Entry("F.elu", "baseline", "PyTorch's ELU (the op being replaced)"),
    Entry("torch.compile(F.elu)", "baseline", "Inductor's generated Triton kernel"),
)
STEPS = (
    Entry("1_naive", "step", "scalar, 1 element/thread, 256 threads, expf", "1_naive"),
    Entry("2_float4", "step", "float4, 1 vector/thread, 256 threads, expf", "2_float4"),
    Entry("3_grid_stride", "step", "float4 grid-stride, 1152 x 512 (the seed's launch)", "3_grid_stride"),
    _grid("3_grid_stride_2_waves", "float4 grid-stride, 2 whole waves x 512", "-DELU_GRID_WAVES=2",
          group="grid_waves", kind="step"),
    Entry("4_fast_math", "step", "step 2 with __expf, --use_fast_math", "4_fast_math"),
    Entry("5_streaming", "step", "2 float4/thread, 128 threads, __ldcs/__stcs, expm1f", "5_streaming"),
)
ABLATIONS = (
    *(_grid(f"3_grid_stride_{w}_waves", f"float4 grid-stride, {w} whole wave(s) x 512", f"-DELU_GRID_WAVES={w}",
            group="grid_waves", base="3_grid_stride_2_waves") for w in (1, 8, 64, 512)),
    _grid("3_grid_stride_one_shot", "grid-stride kernel, one vector per thread (no loop), x 512",
          "-DELU_GRID_WAVES=-1", group="grid_waves", base="3_grid_stride_2_waves"),
    _grid("3_grid_stride_2_waves_256t", "2 whole waves of 256-thread blocks (same threads resident)",
          "-DELU_GRID_WAVES=2", "-DELU_GRID_THREADS=256", group="grid_one_change", base="3_grid_stride_2_waves"),
    _grid("3_grid_stride_2_waves_unroll_1", "2 whole waves x 512, loop not unrolled (one load in flight)",
          "-DELU_GRID_WAVES=2", "-DELU_GRID_UNROLL=1", group="grid_one_change", base="3_grid_stride_2_waves"),
    _from_step2("5_as_step_2", "step 5's file with all of step 2's choices (control: should equal step 2)"),
    _from_step2("2+128_threads", "step 2 with 128-thread blocks", THREADS="128"),
    _from_step2("2+2_vectors", "step 2 with 2 float4 per thread", VECS="2"),
    _from_step2("2+4_vectors", "step 2 with 4 float4 per thread", VECS="4"),
    _from_step2("2+hints", "step 2 with __ldcs/__stcs", HINTS="1"),
    _from_step2("2+expm1f", "step 2 with expm1f", OP="Expm1f"),
    Entry("5_streaming_expf", "ablation", "step 5 with expf instead of expm1f", "5_streaming",
          ("-DELU_STREAMING_OP=Expf",), group="step5_formula", base="5_streaming"),
)
_ALL = (*BASELINES, *STEPS, *ABLATIONS)
ENTRIES = {e.name: e for e in _ALL}
if len(ENTRIES) != len(_ALL):
    raise ValueError("elu_study.study: entry names must be unique")
for _e in _ALL:
    if _e.base is not None and _e.base not in ENTRIES:
        raise ValueError(f"elu_study.study: {_e.name}'s base {_e.base!r} is not an entry")
KINDS = ("baseline", "step", "ablation")


def group(name: str) -> list[Entry]:
    """The entries that answer one question (see GROUPS), in the order they are listed."""
    if name not in GROUPS:
        raise KeyError(f"unknown group {name!r}; groups: {', '.join(GROUPS)}")
    return [e for e in _ALL if e.group == name]


def builds(entries=None) -> list[tuple[str, tuple[str, ...]]]:
    """Every (variant, flags) that entries compile (default: the whole study), for build_all."""
    entries = ENTRIES.values() if entries is None else entries
    return sorted({(e.variant, e.flags) for e in entries if e.variant})


def elu_fn(entry: Entry) -> Callable:
    """(x, alpha, out) -> out for an entry, so that checks can poison the output."""
    import torch.nn.functional as F

    if entry.variant:
        module = entry.build()
        return lambda x, alpha, out: module.elu(x, alpha, out=out)
    if entry.name == "F.elu":
        return lambda x, alpha, out: out.copy_(F.elu(x, alpha))
    if entry.name == "torch.compile(F.elu)":
        compiled = _compiled_elu()
        return lambda x, alpha, out: out.copy_(compiled(x, alpha))
    raise ValueError(f"{entry.name} computes no ELU")


def _compiled_elu():
    import torch
    import torch.nn.functional as F

    return torch.compile(F.elu)


def timed_call(entry: Entry, x, y) -> Callable[[], object]:
    """The exact call that is timed (and profiled): the kernel alone, its output preallocated where it can be."""
    import torch.nn.functional as F

    if entry.variant:
        module = entry.build()
        return lambda: module.elu(x, ALPHA, out=y)
    if entry.name == "copy_":
        return lambda: y.copy_(x)
    if entry.name == "F.elu":
        return lambda: F.elu(x, ALPHA)  # allocates, as the original model does; the caching allocator makes that free
    if entry.name == "torch.compile(F.elu)":
        compiled = _compiled_elu()
        return lambda: compiled(x, ALPHA)
    raise ValueError(f"unknown entry {entry.name}")


@dataclass
class Measurement:
    """What a live run measured for one entry, ready to be saved as a results row."""

    name: str
    kind: str
    what: str
    group: str
    base: str | None
    flags: list[str]
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


def resolve(entries) -> list[Entry]:
    return [ENTRIES[e] if isinstance(e, str) else e for e in entries]


def input_tensor(shape=SHAPE):
    """The one input every timing and profile uses: randn scaled so both branches run, drawn once."""
    import torch

    from .check import INPUT_SCALE

    gen = torch.Generator(device="cuda").manual_seed(1234)
    return torch.randn(shape, device="cuda", generator=gen).mul_(INPUT_SCALE)


def measure(entries, *, shape=SHAPE, trials: int = 3, rounds: int = 5, progress: bool = False) -> dict:
    """Check every entry, then time them all in interleaved rounds; return a results record."""
    import torch

    from .check import check_elu, near_zero_rel_error
    from .sass import inspect_variant
    from .timing import time_interleaved

    entries = resolve(entries)
    numel = shape[0] * shape[1]
    rows = {}
    with _quiet():
        iterator = entries
        if progress:
            from tqdm.auto import tqdm

            iterator = tqdm(entries, desc="checking", unit="entry")
        for entry in iterator:
            m = Measurement(entry.name, entry.kind, entry.what, entry.group, entry.base, list(entry.flags), timing={})
            if entry.checked:
                fn = elu_fn(entry)
                m.check = check_elu(fn, shape=shape, alpha=ALPHA, trials=trials).to_dict()
                m.near_zero_rel_err = near_zero_rel_error(fn, ALPHA)
            if entry.variant:
                m.sass = inspect_variant(entry.build()).to_dict()
            rows[entry.name] = m
        torch.cuda.empty_cache()
        x = input_tensor(shape)
        y = torch.empty_like(x)
        calls = {e.name: timed_call(e, x, y) for e in entries}
        timings = time_interleaved(calls, rounds=rounds, progress=progress)
        for name, timing in timings.items():
            rows[name].timing = timing
        del x, y, calls
        torch.cuda.empty_cache()
    prov = provenance()
    spec = gpu_spec(prov["gpu"])
    record = {
        "provenance": prov,
        "problem": {"shape": list(shape), "dtype": "float32", "alpha": ALPHA, "numel": numel},
        "peak_bytes_per_s": spec.peak_bytes_per_s if spec else None,
        "peak_source": f"{spec.label} {spec.source}" if spec else None,
        "method": {"trials": trials, "rounds": rounds, "interleaved": True},
        "rows": [m.__dict__ for m in rows.values()],
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


def grid_stride_blocks(entry: Entry | str, sm_count: int, numel: int) -> int:
    """The grid a grid-stride entry launches at full size (the launcher's rule, in Python)."""
    entry = ENTRIES[entry] if isinstance(entry, str) else entry
    if entry.variant != "3_grid_stride":
        raise ValueError(f"{entry.name} is not a grid-stride entry")
    knobs = dict(f[2:].split("=") for f in entry.flags if f.startswith("-DELU_GRID_"))
    threads = int(knobs.get("ELU_GRID_THREADS", 512))
    waves = int(knobs.get("ELU_GRID_WAVES", 0))
    needed = -(-(numel // 4) // threads)
    per_sm = 2048 // threads  # these kernels use few registers: the thread limit decides
    wanted = 1152 if waves == 0 else needed if waves < 0 else waves * sm_count * per_sm
    return min(needed, wanted)
