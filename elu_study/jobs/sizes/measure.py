"""Measuring the sweep on a GPU, for each entry at every length:

- a check: the output NaN-poisoned, then every element compared with ``F.elu`` (atol = rtol = 1e-4) and counted
  unwritten if still NaN (in chunks, so memory stays bounded);
- cold GPU time: each call after a 256 MiB write that flushes the L2 (do_bench's method), CUDA events around it;
- warm GPU time: the same calls back to back with no flush, so x (just read) and y (just written) stay in the L2
  while their 8 bytes per element fit;
- host time per call: wall-clock of the Python call (``timed_call``) in a tight loop while a sleep kernel holds the
  GPU busy, so no call waits for the GPU: the CPU-side cost alone (checks, the binding or dispatcher, the launch).

The GPU timings, too, are enqueued behind a sleep kernel that outlasts the host's loop, so that no event pair
brackets time the GPU spent waiting for the host (at a few µs per kernel the host is slower than the GPU)."""

import functools
import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from elu_study.core import text
from elu_study.core.check import ATOL, INPUT_SCALE, RTOL
from elu_study.core.entries import ALPHA
from elu_study.core.hardware import SHAPE, gpu_spec, provenance
from elu_study.core.harness import elu_fn, quiet, timed_call
from elu_study.core.timing import sleep_cycles_per_ms, summarize
from elu_study.jobs.sizes.analysis import derive
from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT, CHECK_CHUNK, FLUSH_BYTES, HOST_REPEATS, MIN_RUNS, runs
from elu_study.pytorch.nn import ELU

QUANTILES = ("median_ms", "p10_ms", "p90_ms", "runs")  # kept per point


class Gpu:
    """The L2 flush buffer and a calibrated sleep kernel that holds the GPU busy while the host enqueues."""

    def __init__(self):
        self.cache = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self.cycles_per_ms = sleep_cycles_per_ms()

    def flush(self):
        self.cache.zero_()

    def sleep(self, ms: float):
        torch.cuda._sleep(max(1, int(ms * self.cycles_per_ms)))


def host_times(call, calls: int, gpu: Gpu, repeats: int = HOST_REPEATS) -> tuple[list[float], int]:
    """Per-call wall time (ms) of ``calls`` back-to-back calls, ``repeats`` times, each loop enqueued while a sleep
    kernel holds the GPU; the per-loop means, and in how many loops the sleep outlasted the loop (a diagnostic)."""
    means, busy_loops, guess_ms = [], 0, 0.05
    for _ in range(repeats):
        torch.cuda.synchronize()
        gpu.sleep(calls * guess_ms * 2 + 0.2)
        asleep = torch.cuda.Event()
        asleep.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        t1 = time.perf_counter()
        busy_loops += not asleep.query()
        torch.cuda.synchronize()
        means.append((t1 - t0) * 1e3 / calls)
        guess_ms = means[-1]
    return means, busy_loops


def event_times(call, runs_: int, gpu: Gpu, flush: bool, host_ms: float, warmup: int = 3) -> tuple[list[float], int]:
    """GPU time (ms) of each of ``runs_`` calls between CUDA events, enqueued behind a sleep that outlasts
    the host's loop; with ``flush`` each call follows a write of FLUSH_BYTES (L2 cold)."""
    per_iter = host_ms + 0.02 + (0.01 if flush else 0.0)  # the call, two event records, the flush launch
    retries = 0
    for attempt in range(3):
        n = max(MIN_RUNS, runs_ >> attempt)  # a full launch queue would block the host: fewer at a time
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        torch.cuda.synchronize()
        for _ in range(warmup):
            call()
        gpu.sleep(n * per_iter * 2 * 4**attempt + 0.2)
        asleep = torch.cuda.Event()
        asleep.record()
        for i in range(n):
            if flush:
                gpu.flush()
            starts[i].record()
            call()
            ends[i].record()
        busy = not asleep.query()
        torch.cuda.synchronize()
        if busy:
            break
        retries += 1
    return [s.elapsed_time(e) for s, e in zip(starts, ends)], retries if busy else -1


def compare(y, ref) -> dict:
    """Every element of y against F.elu's: within atol/rtol, and none left NaN (poisoned, never written)."""
    yf, rf = y.reshape(-1), ref.reshape(-1)
    unwritten, max_abs, passed = 0, 0.0, True
    for s in range(0, yf.numel(), CHECK_CHUNK):
        yc, rc = yf[s : s + CHECK_CHUNK], rf[s : s + CHECK_CHUNK]
        nan = torch.isnan(yc)
        unwritten += int(nan.sum().item())
        d = (yc - rc).abs()
        passed &= bool((d <= ATOL + RTOL * rc.abs()).all().item())
        max_abs = max(max_abs, float(torch.where(nan, 0.0, d).max().item()))
    return {"passed": passed and unwritten == 0, "unwritten": unwritten, "max_abs_err_vs_torch": max_abs,
            "elements_compared": int(yf.numel())}


def dynamo_graphs() -> int | None:
    """Graphs torch.compile has compiled in this process so far (a diagnostic; None where torch hides it)."""
    try:
        from torch._dynamo.utils import counters  # noqa: PLC0415, PLC2701 - lazy, guarded: private torch, a diagnostic

        return int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 - only a diagnostic
        return None


def time_point(call, n: int, gpu: Gpu) -> dict:
    """Host, cold and warm times of one call at length n (see the module's docstring)."""
    r = runs(n)
    summary = lambda xs: {k: v for k, v in summarize([xs]).items() if k in QUANTILES}  # the samples left out
    call()  # compiles, autotunes and allocates before any timing
    torch.cuda.synchronize()
    host, host_busy = host_times(call, r["host_calls"], gpu)
    host_ms = float(np.median(host))
    cold, cold_retries = event_times(call, r["cold"], gpu, flush=True, host_ms=host_ms)
    warm, warm_retries = event_times(call, r["warm"], gpu, flush=False, host_ms=host_ms)
    # sleep_retries: GPU timings redone with a longer sleep; -1: even the longest ran out before the host's loop
    # did (those samples may hold host time)
    return {"cold": summary(cold), "warm": summary(warm), "host": summary(host),
            "sleep_retries": {"cold": cold_retries, "warm": warm_retries}, "host_loops_gpu_busy": host_busy}


@functools.cache
def module(name: str) -> torch.nn.Module:
    """One instance per process of a swept module (plan.MODULES), at the study's alpha."""
    return {"nn.ELU": lambda: torch.nn.ELU(ALPHA), "elu_study.ELU": lambda: ELU(ALPHA)}[name]()


def checker(entry):
    """(x, alpha, out) -> out for a checked entry; a module computes at its own alpha, the study's."""
    return (lambda x, alpha, out: out.copy_(module(entry.name)(x))) if entry.kind == "module" else elu_fn(entry)


def measure_point(entry, n: int, x, ref, y, check_fn, gpu: Gpu, errors: list[str]) -> dict:
    """One (entry, length) point: checked (if the entry computes ELU) and timed; a failure is recorded in it."""
    point = {"entry": entry.name, "kind": entry.kind, "n": n, "bytes": BYTES_PER_ELEMENT * n, "check": None}
    try:
        if entry.checked:
            y.fill_(float("nan"))
            out = check_fn(x, ALPHA, y)
            torch.cuda.synchronize()
            point["check"] = compare(out, ref)
        if entry.kind == "module":  # as a model calls it, allocating its output
            m = module(entry.name)
            call = lambda: m(x)
        else:
            call = timed_call(entry, x, y)
        point.update(time_point(call, n, gpu))
        del call
    except Exception as err:  # noqa: BLE001 - recorded, reported, and the run goes on
        point["error"] = f"{type(err).__name__}: {err}"
        errors.append(f"{entry.name} @ n={n}: {point['error']}")
        torch.cuda.synchronize()
    return point


def prime(entries) -> None:
    """Each peer's first call in the process, at the main study's length, as in every other job: CUB's DeviceTransform
    (CCCL as CUDA 13.0 ships it) sizes its tile to the length of a process's first call and keeps it in a ``static``
    for every later call (fixed upstream in NVIDIA/cccl pull request 5112), so a sweep that began at 2^10 elements
    would time CUB with a tile picked for 2^10."""
    peers = [e for e in entries if e.kind == "peer" and e.variant and not e.mode]
    if peers:
        x = torch.randn(SHAPE[0] * SHAPE[1], device="cuda")
        y = torch.empty_like(x)
        for entry in peers:
            entry.build().elu(x, ALPHA, out=y)
        torch.cuda.synchronize()
        del x, y
        torch.cuda.empty_cache()


def measure(entries, sizes) -> dict:
    """The sizes record: every entry checked and timed length by length (one input each, seeded by it), peers primed."""
    entries, points, errors, graphs_before = list(entries), [], [], dynamo_graphs()
    with quiet(), tqdm(total=len(entries) * len(sizes), desc="sizes (entry x length)", unit="point") as bar:
        gpu = Gpu()
        prime(entries)
        check_fns = {e.name: checker(e) for e in entries if e.checked}
        for n in sizes:
            gen = torch.Generator(device="cuda").manual_seed(n)
            x = torch.randn(n, device="cuda", generator=gen).mul_(INPUT_SCALE)
            ref = F.elu(x, ALPHA)
            y = torch.empty_like(x)
            for entry in entries:
                bar.set_postfix_str(f"{entry.name} @ {text.fmt_n(n)}")
                points.append(measure_point(entry, n, x, ref, y, check_fns.get(entry.name), gpu, errors))
                bar.update()
            del x, ref, y
            if n >= 2**27:
                torch.cuda.empty_cache()
    prov, graphs = provenance(), (graphs_before, dynamo_graphs())
    spec = gpu_spec(prov["gpu"])
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return derive({
        "job": "sizes", "provenance": prov,
        "problem": {"dtype": "float32", "alpha": ALPHA, "bytes_per_element": BYTES_PER_ELEMENT,
                    "input": f"randn(n) x {INPUT_SCALE:g}, seeded by n"},
        "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
        "peak_bytes_per_s": spec and spec.peak_bytes_per_s,
        "sizes": list(sizes),
        "entries": [{"name": e.name, "kind": e.kind} for e in entries],
        "torch_compile_graphs": None if None in graphs else graphs[1] - graphs[0],
        "errors": errors, "points": points,
    })
