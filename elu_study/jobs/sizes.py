"""The size sweep: every step and peer from 2^10 to 2^31 elements, cold, warm and on the host.

``python -m elu_study sizes`` measures, for each entry (every step, the peers and the PyTorch
baselines; the ablations are skipped) at every length of ``plan()``:

- a check: the output NaN-poisoned, then every element compared with ``F.elu`` (atol = rtol = 1e-4)
  and counted unwritten if still NaN, at every size (in chunks, so memory stays bounded);
- cold GPU time: each call after a 256 MiB write that flushes the L2 (do_bench's method), CUDA events
  around the call alone;
- warm GPU time: the same calls back to back with no flush, so x (just read) and y (just written)
  are L2-resident while the 8 bytes per element fit in the L2;
- host time per call: wall-clock of the Python call (the ``timed_call`` lambda a caller would write)
  in a tight loop while the GPU is held busy by a sleep kernel, so no call waits for the GPU and the
  time is the CPU-side cost alone: argument checks, the binding or dispatcher, the launch. The
  sleep is checked to outlast the loop (else the loop is repeated with a longer one).

The GPU timings, too, are enqueued behind a sleep kernel that outlasts the host's loop, so that no
event pair brackets time the GPU spent waiting for the host: at a few microseconds per kernel the
host is slower than the GPU, and without it the warm times would be host times.

It writes results/<gpu>-sizes.json (provenance, plan, method, and per entry, length and mode the
quantiles of the samples), its two figures, and the README's sizes block. Without a GPU it prints the
recorded run. The whole run is planned to fit in 4 minutes on an H200 (printed before it starts).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from elu_study.core.hardware import gpu_spec, slug
from elu_study.core import record as results
from elu_study.core.record import README, REFERENCE_GPU, RESULTS_DIR

MIN_EXP, MAX_EXP = 10, 31
# Lengths that are not powers of two: odd ones (the float4 kernels' scalar tail) and round decimal ones.
ODD = (4_097, 1_048_579, 33_554_433)
DECIMAL = tuple(10**k for k in range(4, 10))
BYTES_PER_ELEMENT = 8  # 4 read + 4 written: the least an elementwise float32 op moves
BASELINE_NAMES = ("F.elu", "torch.compile(F.elu)", "F.elu_", "copy_", "read_only", "write_only")
STREAMS = ("read_only", "write_only")  # shown as their sum (the measured floor), not as lines of their own
# The bandwidth figure draws the streams' sum only from here: below, it is two launches, not a bandwidth.
STREAM_SHOWN_FROM = 32 * 2**20
X_COPY_FROM = 64 * 2**20  # the bandwidth figure's linear x copy_ panel starts here (bytes moved)
MODES = ("cold", "warm", "host")
BEGIN, END = "<!-- sizes:begin -->", "<!-- sizes:end -->"

# Timing budget per (entry, length); see runs() and the plan printed by main().
FLUSH_BYTES = 256 * 2**20  # do_bench's L2 flush buffer
COLD_MS = WARM_MS = 10.0  # GPU time aimed at per mode, in runs of one call
MIN_RUNS, MAX_RUNS = 10, 100  # MAX_RUNS bounds the launches queued behind one sleep
HOST_GPU_MS = 10.0  # GPU work queued per host-timing loop
HOST_MIN_CALLS, HOST_MAX_CALLS = 3, 50
HOST_REPEATS = 5  # host-timing loops per point: the spread of their per-call means
MODEL_TBPS = 3.5  # for planning only: the time a call is expected to take
MODEL_LAUNCH_MS = 0.003
CHECK_CHUNK = 1 << 27
BUDGET_S = 240


# -- the plan ------------------------------------------------------------------------------------


def plan(max_exp: int = MAX_EXP, min_exp: int = MIN_EXP, extra: bool = True) -> list[int]:
    """Every power of two from 2^min_exp to 2^max_exp, plus the odd and decimal lengths in that range."""
    sizes = {2**k for k in range(min_exp, max_exp + 1)}
    if extra:
        sizes |= {n for n in (*ODD, *DECIMAL) if 2**min_exp <= n <= 2**max_exp}
    return sorted(sizes)


def sweep_entries(names=None) -> list:
    """Every entry of kind "step" (so a step added later is swept too), the peers, and the baselines."""
    from elu_study.core.entries import ENTRIES, resolve

    if names:
        return resolve(names)
    steps = [e for e in ENTRIES.values() if e.kind == "step" and not e.mode]
    peers = [e for e in ENTRIES.values() if e.kind == "peer"]
    return [*steps, *peers, *(ENTRIES[n] for n in BASELINE_NAMES if n in ENTRIES)]


def model_ms(n: int) -> float:
    """The time a call is expected to take (planning only: run counts and the budget)."""
    return MODEL_LAUNCH_MS + BYTES_PER_ELEMENT * n / (MODEL_TBPS * 1e12) * 1e3


def runs(n: int) -> dict[str, int]:
    """Timed calls per mode at length n: enough for a spread, few at large n."""
    est = model_ms(n)
    clamp = lambda v, lo, hi: int(max(lo, min(hi, v)))  # noqa: E731
    return {
        "cold": clamp(COLD_MS / (est + 0.07), MIN_RUNS, MAX_RUNS),  # + the flush
        "warm": clamp(WARM_MS / est, MIN_RUNS, MAX_RUNS),
        "host_calls": clamp(HOST_GPU_MS / est, HOST_MIN_CALLS, HOST_MAX_CALLS),
    }


def estimate_s(sizes, n_entries: int, compile_s: float = 40.0) -> float:
    """The planned wall time: the model's GPU time per call over every call made, plus fixed costs."""
    total = compile_s  # torch.compile's dynamic graph, Triton's autotuning per size class, module loads
    for n in sizes:
        r, est = runs(n), model_ms(n)
        calls = 3 + HOST_REPEATS * r["host_calls"] + r["cold"] + 2 + r["warm"] + 3
        gpu_ms = calls * est + r["cold"] * 0.07
        host_ms = HOST_REPEATS * r["host_calls"] * 0.03 + (r["cold"] + r["warm"]) * 0.05 + 8  # sleeps, checks
        total += n_entries * (gpu_ms + host_ms) / 1e3 + BYTES_PER_ELEMENT * n / 1e12 * 3  # inputs, reference
    return total


def fmt_n(n: int) -> str:
    """2^20 for powers of two, else the number with thousands separators."""
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else f"{n:,}"


def fmt_bytes(b: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            v = b / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{b:.0f} B"


# -- measuring (GPU) -----------------------------------------------------------------------------


class _Gpu:
    """The L2 flush buffer and a calibrated sleep kernel that holds the GPU busy while the host enqueues."""

    def __init__(self):
        import torch

        self.torch = torch
        self.cache = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        cycles = 10_000_000
        torch.cuda._sleep(cycles // 10)  # first use outside the measurement
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        self.cycles_per_ms = cycles / start.elapsed_time(end)

    def flush(self):
        self.cache.zero_()

    def sleep(self, ms: float):
        self.torch.cuda._sleep(max(1, int(ms * self.cycles_per_ms)))


def host_times(call, calls: int, gpu: _Gpu, repeats: int = HOST_REPEATS) -> tuple[list[float], int]:
    """Per-call wall time (ms) of ``calls`` back-to-back calls, ``repeats`` times, each loop enqueued while a
    sleep kernel holds the GPU; returns the per-loop means and in how many loops the sleep outlasted the loop
    (launches are asynchronous, so an idle GPU does not stop the clock; this is a diagnostic)."""
    torch = gpu.torch
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


def event_times(call, runs_: int, gpu: _Gpu, flush: bool, host_ms: float, warmup: int = 3) -> tuple[list[float], int]:
    """GPU time (ms) of each of ``runs_`` calls between CUDA events, enqueued behind a sleep that outlasts
    the host's loop; with ``flush`` each call follows a write of FLUSH_BYTES (L2 cold)."""
    torch = gpu.torch
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


def summary(samples: list[float]) -> dict:
    """Quantiles of one (entry, length, mode) point, as timing.summarize gives them (without the samples)."""
    from elu_study.core.timing import summarize

    s = summarize([samples])
    return {k: s[k] for k in ("median_ms", "p10_ms", "p90_ms", "p99_ms", "mean_ms", "min_ms", "max_ms", "runs")}


def _compare(y, ref) -> dict:
    """Every element of y against F.elu's: within atol/rtol, and none left NaN (poisoned, never written)."""
    import torch

    from elu_study.core.check import ATOL, RTOL

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


def _dynamo_graphs() -> int | None:
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 - only a diagnostic
        return None


def measure(entries, sizes, progress: bool = True) -> dict:
    """Check and time every entry at every length; return the sizes record."""
    import torch
    import torch.nn.functional as F

    from elu_study.core.check import INPUT_SCALE
    from elu_study.core.hardware import provenance
    from elu_study.core.entries import ALPHA
    from elu_study.core.harness import quiet, elu_fn, timed_call

    entries = list(entries)
    points, errors = [], []
    graphs_before = _dynamo_graphs()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(entries) * len(sizes), desc="sizes (entry x length)", unit="point")
    with quiet():
        gpu = _Gpu()
        check_fns = {e.name: elu_fn(e) for e in entries if e.checked}
        for n in sizes:
            gen = torch.Generator(device="cuda").manual_seed(n)
            x = torch.randn(n, device="cuda", generator=gen).mul_(INPUT_SCALE)
            ref = F.elu(x, ALPHA)
            y = torch.empty_like(x)
            r = runs(n)
            for entry in entries:
                if bar is not None:
                    bar.set_postfix_str(f"{entry.name} @ {fmt_n(n)}")
                point = {"entry": entry.name, "kind": entry.kind, "n": n, "bytes": BYTES_PER_ELEMENT * n, "check": None}
                try:
                    if entry.checked:
                        y.fill_(float("nan"))
                        out = check_fns[entry.name](x, ALPHA, y)
                        torch.cuda.synchronize()
                        point["check"] = _compare(out, ref)
                    call = timed_call(entry, x, y)
                    call()  # compiles, autotunes and allocates before any timing
                    torch.cuda.synchronize()
                    host, host_busy = host_times(call, r["host_calls"], gpu)
                    host_ms = float(np.median(host))
                    cold, cold_retries = event_times(call, r["cold"], gpu, flush=True, host_ms=host_ms)
                    warm, warm_retries = event_times(call, r["warm"], gpu, flush=False, host_ms=host_ms)
                    point.update({
                        "cold": summary(cold), "warm": summary(warm), "host": summary(host),
                        "host_calls_per_loop": r["host_calls"],
                        # GPU timings redone with a longer sleep; -1: even the longest ran out before the host's
                        # loop did (those samples may hold host time)
                        "sleep_retries": {"cold": cold_retries, "warm": warm_retries},
                        "host_loops_gpu_busy": host_busy,
                    })
                    del call
                except Exception as err:  # noqa: BLE001 - recorded, reported, and the run goes on
                    point["error"] = f"{type(err).__name__}: {err}"
                    errors.append(f"{entry.name} @ n={n}: {point['error']}")
                    torch.cuda.synchronize()
                points.append(point)
                if bar is not None:
                    bar.update()
            del x, ref, y
            if n >= 2**27:
                torch.cuda.empty_cache()
    if bar is not None:
        bar.close()
    prov = provenance()
    spec = gpu_spec(prov["gpu"])
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    graphs_after = _dynamo_graphs()
    record = {
        "job": "sizes",
        "provenance": prov,
        "problem": {"dtype": "float32", "alpha": ALPHA, "bytes_per_element": BYTES_PER_ELEMENT,
                    "input": f"randn(n) x {INPUT_SCALE:g}, seeded by n"},
        "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
        "peak_bytes_per_s": spec.peak_bytes_per_s if spec else None,
        "peak_source": f"{spec.label} {spec.source}" if spec else None,
        "sizes": list(sizes),
        "entries": [{"name": e.name, "kind": e.kind, "what": e.what, "checked": e.checked} for e in entries],
        "method": {
            "cold": f"CUDA events around each call, each after a {FLUSH_BYTES // 2**20} MiB write that flushes the L2 "
                    "(do_bench's method); enqueued behind a sleep kernel so no event pair holds host time",
            "warm": "CUDA events around each call, calls back to back with no flush (x just read, y just written: "
                    "L2-resident where 8 bytes per element fit), behind a sleep kernel likewise",
            "host": "wall-clock per call of the timed Python call in a tight loop while a sleep kernel keeps the GPU "
                    f"busy (checked), so no call waits for the GPU: the CPU-side cost a caller pays; {HOST_REPEATS} "
                    "loops, their per-call means summarized",
            "check": "output NaN-poisoned, every element compared with F.elu (atol = rtol = 1e-4), NaN left = unwritten",
            "runs": {"min": MIN_RUNS, "max": MAX_RUNS, "cold_ms": COLD_MS, "warm_ms": WARM_MS,
                     "host_gpu_ms": HOST_GPU_MS, "host_repeats": HOST_REPEATS},
            "sleep_cycles_per_ms": gpu.cycles_per_ms,
        },
        "torch_compile_graphs": None if graphs_before is None or graphs_after is None else graphs_after - graphs_before,
        "errors": errors,
        "points": points,
    }
    return derive(record)


# -- the record ----------------------------------------------------------------------------------


def record_path(gpu: str = REFERENCE_GPU, results_dir: Path = RESULTS_DIR) -> Path:
    return results.record_path(gpu, "sizes", results_dir)


def save(record: dict, results_dir: Path = RESULTS_DIR) -> Path:
    return results.save(record, "sizes", results_dir)


def load(gpu: str = REFERENCE_GPU, results_dir: Path = RESULTS_DIR) -> dict | None:
    path = record_path(gpu, results_dir)
    return json.loads(path.read_text()) if path.exists() else None


def _ok(p: dict) -> bool:
    return "error" not in p and "cold" in p


def point(record: dict, entry: str, n: int) -> dict:
    for p in record["points"]:
        if p["entry"] == entry and p["n"] == n:
            return p
    raise KeyError(f"no point for {entry!r} at n={n}")


def series(record: dict, entry: str, mode: str, q: str = "median_ms") -> tuple[np.ndarray, np.ndarray]:
    """(lengths, values) of one entry in one mode, lengths ascending, failed points left out."""
    pts = sorted((p for p in record["points"] if p["entry"] == entry and _ok(p)), key=lambda p: p["n"])
    return np.array([p["n"] for p in pts], dtype=np.float64), np.array([p[mode][q] for p in pts])


def derive(record: dict) -> dict:
    """Derived numbers every view uses: TB/s per point, the floors per length, where the regimes change."""
    peak = record.get("peak_bytes_per_s")
    for p in record["points"]:
        if _ok(p):
            for mode in ("cold", "warm"):
                p[f"{mode}_tbps"] = p["bytes"] / (p[mode]["median_ms"] * 1e-3) / 1e12
    floors = {}
    for n in record["sizes"]:
        f = {"datasheet_ms": BYTES_PER_ELEMENT * n / peak * 1e3 if peak else None}
        for mode in ("cold", "warm"):
            try:
                halves = [point(record, s, n) for s in STREAMS]
            except KeyError:
                halves = []
            f[f"stream_{mode}_ms"] = sum(h[mode]["median_ms"] for h in halves) if halves and all(map(_ok, halves)) else None
        floors[str(n)] = f
    record["floors"] = floors
    record["regimes"] = regimes(record)
    return record


def regimes(record: dict, reference: str = "F.elu") -> dict:
    """Where the regimes change, measured on the reference entry (F.elu):

    - launch_bound_max_n: the largest length at which its host time per call is at least its warm GPU time
      (a Python loop of such calls is paced by the CPU);
    - l2_fit_max_n: the largest length whose 8 bytes per element fit in the L2;
    - warm_gain: cold over warm median time per length (above 1: the L2 helped).
    """
    out = {"reference": reference, "launch_bound_max_n": None, "l2_fit_max_n": None, "warm_gain": {}}
    l2 = record.get("l2_bytes") or 0
    fits = [n for n in record["sizes"] if BYTES_PER_ELEMENT * n <= l2]
    out["l2_fit_max_n"] = max(fits) if fits else None
    pts = [p for p in record["points"] if p["entry"] == reference and _ok(p)]
    bound = [p["n"] for p in pts if p["host"]["median_ms"] >= p["warm"]["median_ms"]]
    out["launch_bound_max_n"] = max(bound) if bound else None
    out["warm_gain"] = {str(p["n"]): p["cold"]["median_ms"] / p["warm"]["median_ms"] for p in pts}
    return out


def frame(record: dict, sizes=None, entries=None):
    """One line per (entry, length): µs cold, warm and on the host (median, p10-p90), TB/s, verdict."""
    import pandas as pd

    rows = []
    for p in record["points"]:
        if (sizes is not None and p["n"] not in sizes) or (entries is not None and p["entry"] not in entries):
            continue
        c = p.get("check")
        row = {"entry": p["entry"], "n": fmt_n(p["n"]), "moved": fmt_bytes(p["bytes"]),
               "correct": "n/a" if c is None else ("yes" if c["passed"] else "NO")}
        if _ok(p):
            for mode in MODES:
                row[f"{mode} µs"] = 1e3 * p[mode]["median_ms"]
                row[f"{mode} p10-p90 µs"] = f"{1e3 * p[mode]['p10_ms']:.2f}-{1e3 * p[mode]['p90_ms']:.2f}"
            row["cold TB/s"], row["warm TB/s"] = p["cold_tbps"], p["warm_tbps"]
        else:
            row["error"] = p.get("error")
        rows.append(row)
    return pd.DataFrame(rows).set_index("entry")


FORMATS = {"cold µs": "{:.2f}", "warm µs": "{:.2f}", "host µs": "{:.2f}", "cold TB/s": "{:.3f}", "warm TB/s": "{:.3f}"}


# -- what the record says (README block, notebook) -----------------------------------------------


def _custom(record: dict) -> list[str]:
    """The custom kernels: steps and peers (what a user would write or reach for instead of F.elu)."""
    return [e["name"] for e in record["entries"] if e["kind"] in ("step", "peer")]


def _us(record, entry, n, mode) -> float:
    """An entry's median at one length and mode, µs (NaN where the point failed to run)."""
    p = point(record, entry, n)
    return 1e3 * p[mode]["median_ms"] if _ok(p) else float("nan")


def small_sizes(record: dict) -> list[int]:
    """The launch-bound lengths (up to regimes.launch_bound_max_n), or the smallest length if none is."""
    top = record["regimes"]["launch_bound_max_n"] or min(record["sizes"])
    return [n for n in record["sizes"] if n <= top]


def host_median_us(record: dict, entry: str, sizes) -> float:
    """Median over lengths of an entry's host time per call, µs."""
    values = [_us(record, entry, n, "host") for n in sizes if _ok(point(record, entry, n))]
    return float(np.median(values)) if values else float("nan")


def classify(record: dict, entry: str, n: int, mode: str) -> str:
    """"faster" or "slower" than the reference (F.elu) only where the p10-p90 ranges do not overlap, else "within"."""
    a, b = point(record, entry, n)[mode], point(record, record["regimes"]["reference"], n)[mode]
    if a["p90_ms"] < b["p10_ms"]:
        return "faster"
    if a["p10_ms"] > b["p90_ms"]:
        return "slower"
    return "within"


def _versus(record: dict, names, n: int, mode: str) -> str:
    """Faster / within the spread of / slower than F.elu at one length and mode (p10-p90 ranges compared), each
    entry with its median and its median over F.elu's."""
    ref = record["regimes"]["reference"]
    base = _us(record, ref, n, mode)
    t = {c: _us(record, c, n, mode) for c in names if _ok(point(record, c, n))}
    kind = {c: classify(record, c, n, mode) for c in t}
    fmt = lambda k: ", ".join(f"`{c}` {t[c]:.2f} ({t[c] / base:.2f}x)" for c in sorted(t, key=t.get)  # noqa: E731
                              if kind[c] == k) or "none"
    return (f"faster than {ref} (p10-p90 ranges apart): {fmt('faster')}; within the spread of {ref} (ranges overlap): "
            f"{fmt('within')}; slower: {fmt('slower')}")


def _spread_us(record: dict, names, n: int, mode: str) -> float:
    t = [_us(record, c, n, mode) for c in names if _ok(point(record, c, n))]
    return max(t) - min(t) if t else float("nan")


def summary_lines(record: dict, main: dict | None = None) -> list[str]:
    """The sweep in words, every number from the record (and, for one comparison, the main study's record ``main``,
    by default results/<gpu>.json where it exists): the README block and notebook 09 print these."""
    p = record["provenance"]
    names = [e["name"] for e in record["entries"]]
    sizes = record["sizes"]
    checked = [q for q in record["points"] if q.get("check") is not None]
    good = sum(q["check"]["passed"] for q in checked)
    reg = record["regimes"]
    ref = reg["reference"]
    lines = [
        f"Measured on an {p['gpu']} by `python -m elu_study sizes` ({p['date_utc'][:10]}, commit {p.get('commit')}): "
        f"{len(names)} entries at {len(sizes)} lengths from {fmt_n(sizes[0])} to {fmt_n(sizes[-1])} elements "
        f"({fmt_bytes(BYTES_PER_ELEMENT * sizes[0])} to {fmt_bytes(BYTES_PER_ELEMENT * sizes[-1])} moved); every output "
        f"NaN-poisoned and compared element by element with F.elu: {good} of {len(checked)} checks pass"
        + (f"; {len(record['errors'])} points failed to run: {'; '.join(record['errors'][:3])}" if record["errors"] else "")
        + ". GPU times are CUDA-event medians (cold: L2 flushed before each call; warm: back to back); host time "
        "is the wall-clock of the Python call with the GPU held busy, so that no call waits for the GPU: the CPU-side "
        "cost of the call (it grows at the largest lengths, see below).",
    ]
    if ref not in names:
        return lines
    small = small_sizes(record)
    lb = reg["launch_bound_max_n"]
    h_ref = host_median_us(record, ref, small)
    if lb is not None:
        lines.append(
            f"- **Launch-bound up to {fmt_n(lb)} elements ({fmt_bytes(BYTES_PER_ELEMENT * lb)} moved).** There {ref}'s "
            f"host time per call (median {h_ref:.1f} µs) is at least its warm GPU time "
            f"({_us(record, ref, lb, 'warm'):.1f} µs at {fmt_n(lb)}): a Python loop of such calls is paced by the CPU, "
            "not the GPU.")
    else:
        lines.append(f"- **Never launch-bound:** {ref}'s warm GPU time exceeds its host time ({h_ref:.1f} µs) "
                     f"even at {fmt_n(sizes[0])} elements.")
    custom = [c for c in _custom(record) if c in names]
    host = {c: host_median_us(record, c, small) for c in custom}
    cheaper = [c for c in custom if host[c] < h_ref]
    dearer = [c for c in custom if host[c] >= h_ref]
    fmt = lambda cs: ", ".join(f"`{c}` {host[c]:.1f}" for c in cs) or "none"  # noqa: E731
    lines.append(
        f"- **Host cost per call, median over the launch-bound lengths** ({fmt_n(small[0])} to {fmt_n(small[-1])}; "
        f"µs; {ref} {h_ref:.1f}"
        + (f", F.elu_ {host_median_us(record, 'F.elu_', small):.1f}" if "F.elu_" in names else "")
        + (f", torch.compile {host_median_us(record, 'torch.compile(F.elu)', small):.1f}" if "torch.compile(F.elu)" in names else "")
        + f"): cheaper than {ref}: {fmt(cheaper)}; dearer: {fmt(dearer)}. The steps and CUB go through the pybind11 "
        "binding (its checks, a device guard, the launch); F.elu through ATen's dispatcher; Triton through its "
        "Python launcher and autotuner. Which part of each dominates is a hypothesis: it was not profiled.")
    paced = lambda c, n: max(_us(record, c, n, "host"), _us(record, c, n, "warm"))  # noqa: E731
    wins = {c: sum(paced(c, n) < paced(ref, n) for n in small if _ok(point(record, c, n))) for c in custom}
    lines.append(
        f"- **In a loop of small calls** ({fmt_n(small[0])} to {fmt_n(small[-1])}, {len(small)} lengths) a call costs "
        f"at least the larger of its host and warm GPU times (both measured; the larger-of is a model). Lengths at "
        f"which that is below {ref}'s: " + ", ".join(f"`{c}` {wins[c]}" for c in custom) + ".")
    n0 = sizes[0]
    lines.append(
        f"- **GPU time at {fmt_n(n0)} elements, warm** (µs; {ref} {_us(record, ref, n0, 'warm'):.2f}, cold "
        f"{_us(record, ref, n0, 'cold'):.2f}): {_versus(record, custom, n0, 'warm')}. The spread between the custom "
        f"kernels is {_spread_us(record, custom, n0, 'warm'):.2f} µs, against {ref}'s host cost of {h_ref:.1f} µs per call.")
    fit = reg["l2_fit_max_n"]
    if fit is not None and fit != n0 and fit in sizes:
        lines.append(
            f"- **In the L2, at {fmt_n(fit)} elements, warm** (µs; {ref} {_us(record, ref, fit, 'warm'):.2f}): "
            f"{_versus(record, custom, fit, 'warm')}.")
    if 4096 in sizes and 4097 in sizes:
        pairs = [c for c in ("2_float4", "cub_transform", "triton", ref) if c in names
                 and _ok(point(record, c, 4096)) and _ok(point(record, c, 4097))]
        lines.append(
            "- **An odd length** (4,097 against 2^12, warm µs): "
            + ", ".join(f"`{c}` {_us(record, c, 4097, 'warm'):.2f} vs {_us(record, c, 4096, 'warm'):.2f}" for c in pairs)
            + ". The float4 steps send the n % 4 tail to a second, scalar launch (kernels/common/elu.cuh); "
            "CUB and Triton handle it inside their one kernel.")
    fit = reg["l2_fit_max_n"]
    if fit is not None and str(fit) in reg["warm_gain"]:
        beyond = [n for n in sizes if BYTES_PER_ELEMENT * n >= 4 * record["l2_bytes"] and str(n) in reg["warm_gain"]]
        lines.append(
            f"- **The L2** ({fmt_bytes(record['l2_bytes'])}) holds x and y up to {fmt_n(fit)} elements: there {ref}'s cold "
            f"time is {reg['warm_gain'][str(fit)]:.2f}x its warm time"
            + (f"; from {fmt_n(beyond[0])} ({fmt_bytes(BYTES_PER_ELEMENT * beyond[0])}) on, {reg['warm_gain'][str(beyond[0])]:.2f}x."
               if beyond else "."))
    lines.extend(_host_growth_lines(record))
    lines.extend(_top_lines(record, main))
    return lines


# Entries whose timed call allocates its output (study.timed_call): F.elu as the model calls it, and torch.compile's.
ALLOCATES = ("F.elu", "torch.compile(F.elu)")


def _host_growth_lines(record: dict) -> list[str]:
    """Host time at the largest length against the launch-bound median, every entry (measured), and a hypothesis."""
    names = [e["name"] for e in record["entries"]]
    top, small = record["sizes"][-1], small_sizes(record)
    if top in small:
        return []
    base = {c: host_median_us(record, c, small) for c in names}
    at = {c: _us(record, c, top, "host") for c in names if _ok(point(record, c, top))}
    grown = sorted(at, key=lambda c: -at[c] / base[c])
    prev = [n for n in record["sizes"] if n < top and n & (n - 1) == 0]
    mid = prev[-1] if prev else None
    fmt = lambda c: (f"`{c}` {base[c]:.1f} -> " + (f"{_us(record, c, mid, 'host'):.1f} at {fmt_n(mid)}, " if mid else "")  # noqa: E731
                     + f"{at[c]:.1f} ({at[c] / base[c]:.2f}x)")
    alloc = [c for c in ALLOCATES if c in at]
    return [
        f"- **Host time grows at the largest lengths** (µs per call, median over the launch-bound lengths -> at "
        f"{fmt_n(top)} elements, sorted by growth): " + ", ".join(fmt(c) for c in grown) + ". "
        "HYPOTHESIS, not measured: for the calls that allocate their output (" + ", ".join(f"`{c}`" for c in alloc)
        + f"; the others write into a preallocated y or in place) part of it is the caching allocator handing out "
        f"{fmt_bytes(4 * top)} per call; calls that allocate nothing grow too, so that is not all of it (not profiled)."]


def _main_x_copy(record: dict, main: dict | None) -> tuple[dict, str]:
    """Each entry's cold time over copy_'s in the main study's record (results/<gpu>.json), and a label for it."""
    if main is None:
        try:
            from elu_study.core.record import load as load_main

            main = load_main(record["provenance"]["gpu"])
        except (FileNotFoundError, KeyError, ValueError):
            return {}, "", None
    prob = main.get("problem", {})
    shape = "x".join(str(d) for d in prob.get("shape", []))
    label = (f"main study (`results/{slug(main['provenance']['gpu'])}.json`, ({shape}), {prob.get('numel', 0):,} elements, "
             f"commit {main['provenance'].get('commit')})")
    return ({r["name"]: r["x_copy"] for r in main.get("rows", []) if r.get("x_copy") is not None}, label,
            prob.get("numel"))


def _top_lines(record: dict, main: dict | None = None) -> list[str]:
    """Every entry's cold time over copy_'s at the two largest powers of two, beside the main study's, and what
    differs (measured), with the explanations labelled hypotheses."""
    names = [e["name"] for e in record["entries"]]
    sizes = record["sizes"]
    top = sizes[-1]
    if "copy_" not in names or not _ok(point(record, "copy_", top)):
        return []
    powers = [n for n in sizes if n < top and n & (n - 1) == 0]
    mid = powers[-1] if powers else None
    ratio = lambda c, n: _us(record, c, n, "cold") / _us(record, "copy_", n, "cold")  # noqa: E731
    roof = _us(record, "copy_", top, "cold")
    stream = record["floors"][str(top)]["stream_cold_ms"]
    big = [c for c in names if c not in STREAMS and c != "copy_" and _ok(point(record, c, top))]
    ref_main, label, main_numel = _main_x_copy(record, main)
    show = lambda c: (f"`{c}` {ratio(c, top):.3f}"  # noqa: E731
                      + (f" ({fmt_n(mid)}: {ratio(c, mid):.3f}" if mid and _ok(point(record, c, mid)) else " (")
                      + (f"; main study: {ref_main[c]:.3f})" if c in ref_main else ")"))
    lines = [
        f"- **At {fmt_n(top)} elements** ({fmt_bytes(BYTES_PER_ELEMENT * top)}), cold, x copy_'s {roof / 1e3:.3f} ms "
        f"(in brackets: at {fmt_n(mid) if mid else '-'}, and in the {label or 'main study (no record)'}), every entry: "
        + ", ".join(show(c) for c in big)
        + (f"; the measured floor (read_only + write_only) is {1e3 * stream / roof:.3f}x." if stream else ".")]
    notes = []
    if "cub_transform" in big and "cub_transform" in ref_main:
        numel = (main_numel or 0)
        below = [n for n in sizes if n <= numel and _ok(point(record, "cub_transform", n))]
        above = [n for n in sizes if n >= numel and _ok(point(record, "cub_transform", n))]
        bracket = (f"; the sweep's lengths on either side of the main study's {numel:,} elements give "
                   f"{ratio('cub_transform', below[-1]):.3f}x ({fmt_n(below[-1])}) and "
                   f"{ratio('cub_transform', above[0]):.3f}x ({fmt_n(above[0])}), so the length alone does not explain it"
                   if below and above else "")
        notes.append(
            f"`cub_transform` is {ratio('cub_transform', top):.3f}x copy_ here but {ref_main['cub_transform']:.3f}x in "
            f"the main study{bracket}. HYPOTHESIS, not measured: CUB's DeviceTransform picks a different kernel or "
            "configuration for this sweep's 1-D buffers than for the main study's tensor, or the two methods (single "
            "calls behind a sleep kernel here, interleaved do_bench rounds there) treat it differently")
    if "torch.compile(F.elu)" in big and mid and _ok(point(record, "torch.compile(F.elu)", mid)):
        notes.append(
            f"`torch.compile(F.elu)` is {ratio('torch.compile(F.elu)', top):.3f}x at {fmt_n(top)} against "
            f"{ratio('torch.compile(F.elu)', mid):.3f}x at {fmt_n(mid)}: HYPOTHESIS, not measured: {fmt_n(top)} elements "
            "do not fit 32-bit indices, so Inductor's kernel switches to 64-bit index arithmetic")
    if notes:
        lines.append("- " + "; ".join(notes) + ".")
    return lines


def check_inputs(record: dict, empty_kernel_us: tuple[float, float], host_us: float, l2_mib: float) -> None:
    """The predictions' inputs (written before the sweep) beside what the sweep measured for each."""
    ref = record["regimes"]["reference"]
    n0 = record["sizes"][0]
    warm = [_us(record, e["name"], n0, "warm") for e in record["entries"]
            if e["name"] not in STREAMS and _ok(point(record, e["name"], n0))]
    small = small_sizes(record)
    print("Inputs of the predictions (assumed) against the sweep (measured):")
    print(f"- an almost empty kernel's GPU time: assumed {empty_kernel_us[0]:g}-{empty_kernel_us[1]:g} µs; measured "
          f"{min(warm):.2f}-{max(warm):.2f} µs (warm medians of the {len(warm)} entries at {fmt_n(n0)} elements)")
    print(f"- {ref}'s host cost per call: assumed ~{host_us:g} µs; measured {host_median_us(record, ref, small):.1f} µs "
          f"(median over the launch-bound lengths {fmt_n(small[0])} to {fmt_n(small[-1])})")
    print(f"- the L2: assumed {l2_mib:g} MiB; the device reports {fmt_bytes(record['l2_bytes'])}")


# -- the notebook's view (notebooks/09_sizes.ipynb) ----------------------------------------------


def open_record(reference: str = REFERENCE_GPU, results_dir: Path = RESULTS_DIR) -> dict:
    """This GPU's sweep if it has one, else the reference GPU's; says which (the "Data source:" line)."""
    import torch

    gpu, here = reference, None
    if torch.cuda.is_available():
        here = torch.cuda.get_device_name()
        if record_path(here, results_dir).exists():
            gpu = here
    record = load(gpu, results_dir)
    if record is None:
        raise FileNotFoundError(f"no sweep recorded at {record_path(gpu, results_dir)}: run `python -m elu_study sizes`")
    p = record["provenance"]
    where = "NO GPU HERE" if here is None else (f"this GPU ({here})" if slug(here) == slug(gpu) else
                                                 f"{here}, which has no sweep recorded")
    print(f"Data source: results/{record_path(p['gpu']).name}, measured by `python -m elu_study sizes` on {p['gpu']} "
          f"({p['date_utc'][:10]}, commit {p.get('commit')}); running on {where}.")
    return record


QUANTITIES = {
    "launch_bound_max_n": "the largest length at which F.elu's host time per call >= its warm GPU time (elements)",
    "l2_warm_end_n": "the smallest length from which F.elu's cold time is within 10 % of its warm time (elements)",
    "host_ratio": "host time per call over F.elu's, median over the launch-bound lengths",
    "x_copy_top": "cold GPU time at the largest length over copy_'s",
}


def measured(record: dict, quantity: str, entry: str | None = None) -> float | None:
    """One number of the sweep that a prediction is about (see QUANTITIES)."""
    reg = record["regimes"]
    if quantity == "launch_bound_max_n":
        return reg["launch_bound_max_n"]
    if quantity == "l2_warm_end_n":
        fit = reg["l2_fit_max_n"] or 0
        later = [int(n) for n, g in reg["warm_gain"].items() if int(n) > fit and g < 1.1]
        return min(later) if later else None
    if quantity == "host_ratio":
        small = small_sizes(record)
        return host_median_us(record, entry, small) / host_median_us(record, reg["reference"], small)
    if quantity == "x_copy_top":
        top = record["sizes"][-1]
        return point(record, entry, top)["cold"]["median_ms"] / point(record, "copy_", top)["cold"]["median_ms"]
    raise KeyError(f"unknown quantity {quantity!r}; one of {', '.join(QUANTITIES)}")


def check_prediction(record: dict, quantity: str, bounds: tuple[float, float], written: str, entry: str | None = None):
    """A prediction written before the sweep ran, beside what it measured, and whether it held."""
    lo, hi = bounds
    value = measured(record, quantity, entry)
    sizes_ = quantity.endswith("_n")
    show = (lambda v: fmt_n(int(v))) if sizes_ else (lambda v: f"{v:.3g}")  # noqa: E731
    subject = f"{entry}: " if entry else ""
    print(f"Prediction (written {written}): {subject}{QUANTITIES[quantity]} from {show(lo)} to {show(hi)}")
    if value is None:
        print("Measured: no such length in the sweep  ->  MISSED")
        return
    held = "HELD" if lo <= value <= hi else ("MISSED: below" if value < lo else "MISSED: above")
    print(f"Measured: {fmt_n(int(value)) if sizes_ else f'{value:.3f}'}  ->  {held}")


def table(record: dict, sizes=None, entries=None, columns=None):
    """The sweep as a Markdown table (a notebook cell's value)."""
    from IPython.display import Markdown

    from elu_study.core.record import markdown

    df = frame(record, sizes, entries)
    if columns is not None:
        df = df[[c for c in ("n", "moved", *columns) if c in df.columns]]
    return Markdown(markdown(df, FORMATS))


def figure(record: dict, name: str):
    import matplotlib.pyplot as plt

    fig = figures(record, only=name)[name]
    plt.close(fig)  # shown once, as the cell's value
    return fig


def prose(record: dict):
    """The sweep in words (the README's sizes block), as Markdown."""
    from IPython.display import Markdown

    return Markdown("\n".join(summary_lines(record)))


# -- figures -------------------------------------------------------------------------------------


def _style(record: dict):
    """A colour and line style per entry: steps in blues, peers in purples, baselines in greys/greens."""
    import matplotlib.pyplot as plt

    styles = {}
    steps = [e["name"] for e in record["entries"] if e["kind"] == "step"]
    peers = [e["name"] for e in record["entries"] if e["kind"] == "peer"]
    for i, n in enumerate(steps):
        styles[n] = {"color": plt.cm.Blues(0.35 + 0.65 * i / max(1, len(steps) - 1)), "ls": "-"}
    for i, n in enumerate(peers):
        styles[n] = {"color": ("tab:purple", "tab:pink", "tab:brown")[i % 3], "ls": "--"}
    fixed = {"F.elu": ("black", "-"), "torch.compile(F.elu)": ("tab:gray", "--"), "F.elu_": ("dimgray", ":"),
             "copy_": ("tab:green", "--")}
    for e in record["entries"]:
        if e["name"] in fixed:
            styles[e["name"]] = {"color": fixed[e["name"]][0], "ls": fixed[e["name"]][1]}
    return styles


def _lines(record):
    return [e["name"] for e in record["entries"] if e["name"] not in STREAMS]


def _regions(ax, record, xscale: float):
    """The L2 size and the launch-bound region, on an axis whose x is bytes moved (xscale = bytes per unit)."""
    reg = record["regimes"]
    handles = []
    if record.get("l2_bytes"):
        handles.append(ax.axvline(record["l2_bytes"] / xscale, color="tab:cyan", lw=1.2,
                                  label=f"L2 {fmt_bytes(record['l2_bytes'])}: x and y fit left of it"))
    if reg.get("launch_bound_max_n"):
        lo = BYTES_PER_ELEMENT * min(record["sizes"]) / xscale
        hi = BYTES_PER_ELEMENT * reg["launch_bound_max_n"] / xscale
        handles.append(ax.axvspan(lo, hi, color="khaki", alpha=0.35, lw=0,
                                  label=f"launch-bound: {reg['reference']}'s host time\n>= its warm GPU time"))
    return handles


def bandwidth_figure(record: dict):
    """Effective TB/s (8 bytes per element over the median) against bytes moved, cold and warm, p10-p90 bands."""
    import matplotlib.pyplot as plt

    styles = _style(record)
    fig = plt.figure(figsize=(21, 5.6))
    axes = [fig.add_subplot(1, 3, 1)]
    axes += [fig.add_subplot(1, 3, 2, sharey=axes[0]), fig.add_subplot(1, 3, 3)]
    for ax, mode in zip(axes, ("cold", "warm")):
        for name in _lines(record):
            n, med = series(record, name, mode)
            if not n.size:
                continue
            _, p10 = series(record, name, mode, "p10_ms")
            _, p90 = series(record, name, mode, "p90_ms")
            b = BYTES_PER_ELEMENT * n
            tb = lambda ms: b / (ms * 1e-3) / 1e12  # noqa: E731
            ax.plot(b, tb(med), lw=1.4, label=name, **styles.get(name, {}))
            ax.fill_between(b, tb(p90), tb(p10), color=styles.get(name, {}).get("color"), alpha=0.12, lw=0)
        extra = _regions(ax, record, 1.0)
        if record.get("peak_bytes_per_s"):
            extra.append(ax.axhline(record["peak_bytes_per_s"] / 1e12, color="tab:red", ls=":",
                                    label=f"datasheet {record['peak_bytes_per_s'] / 1e12:.1f} TB/s (ceiling)"))
        sizes = np.array([n for n in record["sizes"] if BYTES_PER_ELEMENT * n >= STREAM_SHOWN_FROM], dtype=np.float64)
        stream = np.array([record["floors"][str(int(n))][f"stream_{mode}_ms"] or np.nan for n in sizes], dtype=np.float64)
        if np.isfinite(stream).any():
            ax.plot(BYTES_PER_ELEMENT * sizes, BYTES_PER_ELEMENT * sizes / (stream * 1e-3) / 1e12, color="tab:orange",
                    ls="-.", lw=2, label=f"measured ceiling: read_only + write_only (from {fmt_bytes(STREAM_SHOWN_FROM)})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = [2.0**k for k in range(13, 40, 3) if 2**k <= 2 * BYTES_PER_ELEMENT * max(record["sizes"])]
        ax.set_xticks(ticks, [fmt_bytes(t) for t in ticks])
        ax.set_xlabel("bytes moved per call (8 per element; log scale)")
        ax.set_title(f"{mode}: " + ("L2 flushed before each call" if mode == "cold" else "back to back, no flush"))
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("effective TB/s (median; bands p10-p90; higher is better)")
    _x_copy_panel(axes[2], record, styles)
    _legend(fig, axes[1], f"ELU across sizes (float32), {record['provenance']['gpu']}; copy_ is the roof")
    return fig


def _x_copy_panel(ax, record: dict, styles: dict) -> None:
    """Cold time over copy_'s median, linear, from X_COPY_FROM bytes moved: the differences the log axes hide."""
    big = [n for n in record["sizes"] if BYTES_PER_ELEMENT * n >= X_COPY_FROM and n & (n - 1) == 0
           and _ok(point(record, "copy_", n))]
    if not big:
        return
    roof = np.array([point(record, "copy_", n)["cold"]["median_ms"] for n in big])
    curves = {}
    for name in _lines(record):
        pts = [point(record, name, n) for n in big]
        if not all(map(_ok, pts)):
            continue
        curves[name] = [np.array([q["cold"][k] for q in pts]) / roof for k in ("median_ms", "p10_ms", "p90_ms")]
    stream = np.array([record["floors"][str(n)]["stream_cold_ms"] or np.nan for n in big]) / roof
    # an entry far above the rest (1_naive) would flatten them: it is named in the title instead
    top = sorted(float(np.nanmax(c[0])) for c in curves.values())
    off = {n: float(np.nanmax(c[0])) for n, c in curves.items()
           if len(top) > 2 and float(np.nanmax(c[0])) > 1 + 2 * (top[-2] - 1)}
    x = BYTES_PER_ELEMENT * np.array(big, dtype=np.float64)
    for name, (med, p10, p90) in curves.items():
        if name in off:
            continue
        ax.plot(x, med, lw=1.4, marker=".", **styles.get(name, {}))
        ax.fill_between(x, p10, p90, color=styles.get(name, {}).get("color"), alpha=0.12, lw=0)
    if np.isfinite(stream).any():
        ax.plot(x, stream, color="tab:orange", ls="-.", lw=2)
    shown = [float(np.nanmin(c[0])) for c in curves.values()]
    if np.isfinite(stream).any():
        shown += [float(np.nanmin(stream))]
    lo, hi = min(shown), max(float(np.nanmax(curves[n][0])) for n in curves if n not in off)  # the streams' line may leave it
    pad = max(0.1 * (hi - lo), 0.01)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xscale("log", base=2)
    ticks = [float(v) for v in x if int(v) & (int(v) - 1) == 0]
    ax.set_xticks(ticks[::2], [fmt_bytes(t) for t in ticks[::2]])
    ax.set_xlabel("bytes moved per call (log scale)")
    ax.set_ylabel("cold time / copy_'s cold median (linear; lower is better)")
    ax.set_title(f"cold, x copy_ (powers of two from {fmt_bytes(X_COPY_FROM)} moved)"
                 + (("\noff the chart: " + ", ".join(f"{n} up to {v:.2f}x" for n, v in off.items())) if off else ""))
    ax.grid(alpha=0.3)


def _legend(fig, ax, title: str, right: float = 0.79):
    """The figure's title, and one legend for all panels in a margin on the right (inside the saved image)."""
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, right, 1))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(right, 0.5), fontsize=8, framealpha=0.9)


def time_figure(record: dict):
    """Time per call against length (log-log): GPU time cold and warm, and the host's time per call."""
    import matplotlib.pyplot as plt

    styles = _style(record)
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.6), sharey=True)
    titles = {"cold": "GPU time, cold (L2 flushed)", "warm": "GPU time, warm (back to back)",
              "host": "host time per call (GPU held busy)"}
    sizes = np.array(record["sizes"], dtype=np.float64)
    lowest = min((p[m]["median_ms"] for p in record["points"] if _ok(p) for m in MODES), default=1e-3)
    for ax, mode in zip(axes, MODES):
        for name in _lines(record):
            n, med = series(record, name, mode)
            if not n.size:
                continue
            _, p10 = series(record, name, mode, "p10_ms")
            _, p90 = series(record, name, mode, "p90_ms")
            ax.plot(n, 1e3 * med, lw=1.4, label=name, **styles.get(name, {}))
            ax.fill_between(n, 1e3 * p10, 1e3 * p90, color=styles.get(name, {}).get("color"), alpha=0.12, lw=0)
        _regions(ax, record, BYTES_PER_ELEMENT)
        if mode != "host":
            if record.get("peak_bytes_per_s"):
                ax.plot(sizes, 1e3 * np.array([record["floors"][str(int(n))]["datasheet_ms"] for n in sizes]),
                        color="tab:red", ls=":", label="datasheet floor (bytes / datasheet TB/s)")
            stream = np.array([record["floors"][str(int(n))][f"stream_{mode}_ms"] or np.nan for n in sizes],
                              dtype=np.float64)
            if np.isfinite(stream).any():
                ax.plot(sizes, 1e3 * stream, color="tab:orange", ls="-.", lw=2,
                        label="measured floor: read_only + write_only")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("elements (log 2)")
        ax.set_ylim(bottom=0.5e3 * lowest)  # the datasheet floor of a few KiB is nanoseconds: off the chart
        ax.set_title(titles[mode])
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("µs per call (median; bands p10-p90; lower is better)")
    _legend(fig, axes[0], f"Time per call across sizes (float32), {record['provenance']['gpu']}; copy_ is the roof",
            right=0.83)
    return fig


FIGURES = {"bandwidth": bandwidth_figure, "time": time_figure}


def figures(record: dict, only: str | None = None) -> dict:
    makers = FIGURES if only is None else {only: FIGURES[only]}
    return {name: make(record) for name, make in makers.items()}


def write_figures(record: dict, results_dir: Path = RESULTS_DIR) -> list[Path]:
    from elu_study.jobs.study.figures import save as save_fig

    stem = f"{slug(record['provenance']['gpu'])}-sizes"
    return [save_fig(fig, Path(results_dir) / f"{stem}-{name}.png") for name, fig in figures(record).items()]


def readme_block(record: dict, figure_paths) -> str:
    rel = [Path(p).resolve().relative_to(README.parent).as_posix() if Path(p).resolve().is_relative_to(README.parent)
           else Path(p).name for p in figure_paths]
    body = ["**Across sizes.** Generated from `results/" + record_path(record["provenance"]["gpu"]).name
            + "` by `python -m elu_study sizes` (and `report`); do not edit by hand. Notebook "
            "[09_sizes](notebooks/09_sizes.ipynb) gives the predictions and the evidence.", "",
            *summary_lines(record), "", *(f"![{Path(r).stem}]({r})" for r in rel)]
    return "\n".join(body)


def update_readme(record: dict, figure_paths, readme: Path = README) -> Path:
    """Replace the README's sizes block (between BEGIN and END) with text generated from the record."""
    text = Path(readme).read_text()
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"{readme} has no {BEGIN} ... {END} block")
    Path(readme).write_text(head + BEGIN + "\n" + readme_block(record, figure_paths) + "\n" + END + tail)
    return Path(readme)


def write(record: dict, readme: bool = True, results_dir: Path = RESULTS_DIR) -> list[Path]:
    """The figures, and (for the reference GPU's record in results/) the README block."""
    paths = write_figures(record, results_dir)
    if readme and Path(results_dir).resolve() == RESULTS_DIR.resolve() and slug(record["provenance"]["gpu"]) == REFERENCE_GPU:
        paths.append(update_readme(record, paths))
    return paths


def describe_plan(sizes, entries) -> str:
    r_small, r_big = runs(sizes[0]), runs(sizes[-1])
    return (f"plan: {len(entries)} entries ({', '.join(e.name for e in entries)}) x {len(sizes)} lengths "
            f"({fmt_n(sizes[0])} .. {fmt_n(sizes[-1])}: {', '.join(fmt_n(n) for n in sizes)}); per point: a full check, "
            f"host time ({HOST_REPEATS} loops of {r_small['host_calls']}..{r_big['host_calls']} calls), cold and warm GPU "
            f"time ({r_small['cold']}..{r_big['cold']} and {r_small['warm']}..{r_big['warm']} runs); "
            f"estimated {estimate_s(sizes, len(entries)):.0f} s (budget {BUDGET_S} s)")


def print_record(record: dict) -> None:
    from elu_study.core.record import markdown

    shown = [n for n in record["sizes"] if n in (record["sizes"][0], 2**16, 2**20, 2**24, record["sizes"][-1])]
    print(markdown(frame(record, sizes=shown), FORMATS))
    print()
    print("\n".join(summary_lines(record)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study sizes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-exp", type=int, default=MAX_EXP, help="largest length 2^k (default 31)")
    parser.add_argument("--min-exp", type=int, default=MIN_EXP, help="smallest length 2^k (default 10)")
    parser.add_argument("--no-extra", action="store_true", help="powers of two only (no odd or decimal lengths)")
    parser.add_argument("--entries", default=None, help="comma-separated entry names (default: steps, peers, baselines)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where the record and figures go")
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite the README's sizes block")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        record = load(REFERENCE_GPU, args.results_dir)
        if record is None:
            print(f"NO GPU HERE, and no recorded sweep ({record_path(REFERENCE_GPU, args.results_dir)}): "
                  "run `python -m elu_study sizes` on a GPU.", file=sys.stderr)
            return 2
        print(f"NO GPU HERE: the recorded sweep, {record_path(REFERENCE_GPU, args.results_dir)}:\n")
        print_record(record)
        return 0

    from elu_study.core.entries import builds
    from elu_study.testing.suite import compile_all  # build_all, also from a process that has used CUDA (a test session)

    entries = sweep_entries(args.entries.split(",") if args.entries else None)
    sizes = plan(args.max_exp, args.min_exp, extra=not args.no_extra)
    print(describe_plan(sizes, entries))
    jobs = builds(entries)
    if jobs:
        compile_all(jobs)
    started = time.time()
    record = measure(entries, sizes)
    record["wall_s"] = round(time.time() - started, 1)
    path = save(record, args.results_dir)
    written = write(record, readme=not args.no_readme, results_dir=args.results_dir)
    print(f"\nmeasured in {record['wall_s']:.0f} s; wrote {path} and " + ", ".join(str(p) for p in written))
    print(f"torch.compile graphs compiled during the sweep: {record['torch_compile_graphs']}")
    print()
    print_record(record)
    failed = [f"{q['entry']} @ {fmt_n(q['n'])}" for q in record["points"] if q.get("check") and not q["check"]["passed"]]
    if failed or record["errors"]:
        print(f"\nFAILED correctness: {', '.join(failed) or 'none'}; errors: {len(record['errors'])}", file=sys.stderr)
        for e in record["errors"]:
            print(f"  {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
