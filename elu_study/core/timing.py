"""Timing with CUDA events in two protocols, short (``time_interleaved``) and sustained (``time_sustained``), with
the GPU's clocks, power, clock-event ("throttle") reasons and energy read through NVML, which nothing here changes."""

import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

SAMPLE_DECIMALS = 5  # 10 ns: far below event resolution, keeps the record small
# do_bench's warm-up and timed span per call and round (ms): 25/100 ms are 8/33 passes of float32 copy_ (3 ms); the
# spread that decides a tie is the round-to-round one (clocks), which more passes per round do not narrow.
WARMUP_MS, REP_MS = 25.0, 100.0
POWER_CAP = ("SwPowerCap", "HwPowerBrakeSlowdown")  # clock-event reasons that mean: held at the power limit
ENERGY = "nvmlDeviceGetTotalEnergyConsumption"  # mJ since the driver loaded


@dataclass(frozen=True)
class Sustained:
    """The sustained protocol: settled once, after ``settle_min_s`` or more, the last ``window_s`` of NVML samples has
    mean power within ``power_tol`` of the window before's and median SM clock within ``clock_tol_mhz`` (one 15 MHz
    bin) of it; timed after ``settle_max_s`` even if not; then ``timed_s`` of passes timed."""

    settle_min_s: float = 2.0
    settle_max_s: float = 5.0
    window_s: float = 1.0  # NVML's power reading averages over about a second
    power_tol: float = 0.02
    clock_tol_mhz: float = 15.0
    timed_s: float = 1.0  # 330-1000 passes: the median's step (one pass in hundreds) is far under the regime's spread
    chunk_s: float = 0.1  # passes enqueued between two looks at the samples


def summarize(rounds: list[list[float]]) -> dict:
    """Quantiles over all samples, each round's median (round-to-round noise, ``noise_ms``) and every sample."""
    t = np.concatenate([np.asarray(r, dtype=np.float64) for r in rounds])
    p10, p50, p90 = np.quantile(t, [0.1, 0.5, 0.9])
    return {"median_ms": float(p50), "p10_ms": float(p10), "p90_ms": float(p90), "runs": int(t.size),
            "round_medians_ms": [float(np.median(r)) for r in rounds],
            "samples_ms": [[round(float(v), SAMPLE_DECIMALS) for v in r] for r in rounds]}


def noise_ms(timing: dict) -> float:
    """Run-to-run noise of one entry: the spread of its round medians."""
    medians = timing["round_medians_ms"]
    return max(medians) - min(medians)


class NvmlSampler:
    """Samples GPU 0's SM and memory clocks, power and clock-event reasons in a thread, every 10 ms (none without NVML)."""

    def __init__(self):
        self.samples: list[tuple] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml  # noqa: PLC0415 - lazy: NVML is optional (no driver, no readings)

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception as exc:  # noqa: BLE001 - any NVML failure just means no clock record
            self._nvml = None
            self.error = f"NVML unavailable: {exc}"

    def _read(self) -> tuple:
        n, h = self._nvml, self._handle
        reasons_fn = (getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
                      or n.nvmlDeviceGetCurrentClocksThrottleReasons)
        return (
            n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
            n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
            n.nvmlDeviceGetPowerUsage(h) / 1000.0,
            int(reasons_fn(h)),
        )

    def query(self, fn: str, scale: float = 1.0) -> float | None:
        """One NVML reading by function name, over ``scale``; None without NVML or where the GPU does not report it."""
        try:
            return getattr(self._nvml, fn)(self._handle) / scale
        except Exception:  # noqa: BLE001 - no NVML, or not supported: no reading
            return None

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.samples.append((*self._read(), time.monotonic()))  # (sm, mem, W, reasons, t)
            except Exception as exc:  # noqa: BLE001
                self.error = f"NVML read failed: {exc}"
                return
            time.sleep(0.01)

    def __enter__(self):
        self.samples = []
        if self._nvml is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def summary(self) -> dict:
        if not self.samples:
            return {"samples": 0, "error": self.error}
        a = np.asarray([s[:3] for s in self.samples], dtype=np.float64)
        reasons = Counter(name for s in self.samples for name in decode_reasons(s[3], self._nvml))

        def spread(c):
            return {"min": float(a[:, c].min()), "median": float(np.median(a[:, c])), "max": float(a[:, c].max())}

        return {
            "samples": len(self.samples),
            "sm_clock_mhz": spread(0),
            "mem_clock_mhz": spread(1),
            "power_w": {"mean": float(a[:, 2].mean()), "max": float(a[:, 2].max())},
            "clock_event_reasons": {k: v / len(self.samples) for k, v in sorted(reasons.items())},  # share of samples
        }

    def regime(self, samples: list[tuple]) -> dict:
        """Over some samples: SM and memory clocks (medians, MHz), power (mean, W), share at POWER_CAP; or None."""
        if not samples:
            return dict.fromkeys(("sm_clock_mhz", "mem_clock_mhz", "power_w", "capped_fraction"))
        capped = sum(not set(POWER_CAP).isdisjoint(decode_reasons(s[3], self._nvml)) for s in samples)
        return {"sm_clock_mhz": float(np.median([s[0] for s in samples])),
                "mem_clock_mhz": float(np.median([s[1] for s in samples])),
                "power_w": float(np.mean([s[2] for s in samples])), "capped_fraction": capped / len(samples)}


def decode_reasons(mask: int, nvml) -> list[str]:
    """Names of the set bits of an NVML clock-event ("throttle") reason mask (``nvml``: the pynvml module)."""
    names = set()
    for attr in dir(nvml):
        short = attr.removeprefix("nvmlClocksEventReason").removeprefix("nvmlClocksThrottleReason")
        bit = getattr(nvml, attr)
        if short != attr and short not in ("All", "None", "Unknown") and isinstance(bit, int) and bit and mask & bit == bit:
            names.add(short)
    return sorted(names)


def time_interleaved(calls: dict[str, Callable[[], object]], rounds: int = 5, warmup_ms: float = WARMUP_MS,
                     rep_ms: float = REP_MS, progress: bool = False) -> dict[str, dict]:
    """Time every call once per round, in the same order; per call: ``summarize``, each round's NVML ``summary``, over
    all its rounds the NVML ``regime`` (its power, NVML's ~1 s average, mixes neighbouring entries) and ``energy_j``:
    NVML's energy counter over its do_bench calls per pass they ran, do_bench's L2 flushes (256 MB a pass) included."""
    from triton.testing import do_bench  # noqa: PLC0415 - lazy: triton is optional where nothing is timed

    samples, nvml, kept = defaultdict(list), defaultdict(list), defaultdict(list)  # per name: times, summaries, samples
    energy_mj: dict[str, float | None] = dict.fromkeys(calls, 0.0)
    passes = Counter()
    sampler = NvmlSampler()
    bar = tqdm(total=rounds * len(calls), desc="timing (interleaved rounds)", unit="entry", disable=not progress)
    for _ in range(rounds):
        for name, fn in calls.items():
            def counted(fn=fn, name=name):
                passes[name] += 1
                return fn()

            before = sampler.query(ENERGY)
            with sampler:
                times = do_bench(counted, warmup=warmup_ms, rep=rep_ms, return_mode="all")
            after = sampler.query(ENERGY)
            energy_mj[name] = None if None in (before, after, energy_mj[name]) else energy_mj[name] + after - before
            samples[name].append([float(t) for t in times])
            nvml[name].append(sampler.summary())
            kept[name] += sampler.samples
            bar.update()
    bar.close()
    return {name: {**summarize(samples[name]), "nvml": nvml[name], **sampler.regime(kept[name]),
                   "energy_j": None if energy_mj[name] is None else energy_mj[name] / 1e3 / passes[name]}
            for name in calls}


def settled(samples: list[tuple], rule: Sustained = Sustained()) -> bool:
    """Whether NVML samples (NvmlSampler's, time last) show the board settled by ``rule`` (see Sustained)."""
    a = np.asarray([(s[0], s[2], s[-1]) for s in samples], dtype=np.float64).reshape(-1, 3)
    if not len(a) or a[-1, 2] - a[0, 2] < 2 * rule.window_s:
        return False
    age = a[-1, 2] - a[:, 2]
    last, prev = a[age < rule.window_s], a[(age >= rule.window_s) & (age < 2 * rule.window_s)]
    if not len(prev):
        return False
    return bool(abs(last[:, 1].mean() - prev[:, 1].mean()) <= rule.power_tol * prev[:, 1].mean()
                and abs(np.median(last[:, 0]) - np.median(prev[:, 0])) <= rule.clock_tol_mhz)


def _event_times(fn: Callable[[], object], n: int) -> list[float]:
    """n passes of fn back to back, each between two CUDA events (ms), once they have run."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    events[0].record()
    for end in events[1:]:
        fn()
        end.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in zip(events, events[1:])]


def time_sustained(fn: Callable[[], object], rule: Sustained = Sustained()) -> dict:
    """One call alone, back to back, until power and SM clock settle (``settled``; at most ``rule.settle_max_s``, and
    that long without NVML: ``settled`` None), then ``rule.timed_s`` of passes timed with CUDA events: median and
    spread, the NVML ``regime`` and energy per pass (J). No L2 flush between passes: each moves 6.4-19 GB through a
    60 MiB L2, so a pass finds nothing of its input there, and a flush's own energy would count in every pass."""
    sampler = NvmlSampler()
    start, n = time.monotonic(), 1
    with sampler:
        while True:
            ms = float(np.median(_event_times(fn, n)))
            waited = time.monotonic() - start
            if sampler._nvml is not None and waited >= rule.settle_min_s and settled(list(sampler.samples), rule):
                done = True
                break
            if waited >= rule.settle_max_s:
                done = None if sampler._nvml is None else False
                break
            n = max(1, round(rule.chunk_s * 1e3 / ms))
        n, first = max(1, round(rule.timed_s * 1e3 / ms)), len(sampler.samples)
        before = sampler.query(ENERGY)
        times = _event_times(fn, n)
        after = sampler.query(ENERGY)
    p10, p50, p90 = np.quantile(times, [0.1, 0.5, 0.9])
    return {"median_ms": float(p50), "p10_ms": float(p10), "p90_ms": float(p90), "runs": n,
            "settle_s": round(waited, 2), "settled": done, **sampler.regime(sampler.samples[first:]),
            "energy_j": None if None in (before, after) else (after - before) / 1e3 / n}


def sleep_cycles_per_ms(cycles: int = 10_000_000) -> float:
    """torch.cuda._sleep's spin rate (cycles per ms), to hold the GPU busy while the host enqueues work."""
    torch.cuda._sleep(cycles // 10)  # first use outside the measurement
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return cycles / start.elapsed_time(end)

