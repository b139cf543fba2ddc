"""Timing with CUDA events through triton.testing.do_bench (L2 flushed between calls), in interleaved rounds,
every sample kept, with the GPU's clocks, power and clock-event ("throttle") reasons sampled through NVML."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

SAMPLE_DECIMALS = 5  # 10 ns: far below event resolution, keeps the record small


def summarize(rounds: list[list[float]]) -> dict:
    """Quantiles over all samples, and per round, so round-to-round noise can be told from tails."""
    t = np.concatenate([np.asarray(r, dtype=np.float64) for r in rounds])
    p10, p50, p90, p99 = np.quantile(t, [0.1, 0.5, 0.9, 0.99])
    return {
        "median_ms": float(p50), "p10_ms": float(p10), "p90_ms": float(p90), "p99_ms": float(p99),
        "mean_ms": float(t.mean()), "min_ms": float(t.min()), "max_ms": float(t.max()), "runs": int(t.size),
        "round_medians_ms": [float(np.median(r)) for r in rounds],
        "round_p90_ms": [float(np.quantile(r, 0.9)) for r in rounds],
        "samples_ms": [[round(float(v), SAMPLE_DECIMALS) for v in r] for r in rounds],
    }


def noise_ms(timing: dict) -> float:
    """Run-to-run noise of one entry: the spread of its round medians."""
    medians = timing["round_medians_ms"]
    return max(medians) - min(medians)


class NvmlSampler:
    """Samples SM and memory clocks, power, temperature and clock-event reasons in a thread (nothing without NVML)."""

    def __init__(self, device_index: int = 0, period_s: float = 0.01):
        self.period_s = period_s
        self.samples: list[tuple] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml  # noqa: PLC0415 - lazy: NVML is optional (no driver, no readings)

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
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
            n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
            int(reasons_fn(h)),
        )

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.samples.append(self._read())
            except Exception as exc:  # noqa: BLE001
                self.error = f"NVML read failed: {exc}"
                return
            time.sleep(self.period_s)

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
        return False

    def summary(self) -> dict:
        if not self.samples:
            return {"samples": 0, "error": self.error}
        a = np.asarray([s[:4] for s in self.samples], dtype=np.float64)
        reasons = Counter(name for s in self.samples for name in decode_reasons(s[4], self._nvml))

        def spread(c):
            return {"min": float(a[:, c].min()), "median": float(np.median(a[:, c])), "max": float(a[:, c].max())}

        return {
            "samples": len(self.samples),
            "sm_clock_mhz": spread(0),
            "mem_clock_mhz": spread(1),
            "power_w": {"mean": float(a[:, 2].mean()), "max": float(a[:, 2].max())},
            "temperature_c": {"max": float(a[:, 3].max())},
            "clock_event_reasons": {k: v / len(self.samples) for k, v in sorted(reasons.items())},  # share of samples
        }


def decode_reasons(mask: int, nvml=None) -> list[str]:
    """Names of the set bits of an NVML clock-event ("throttle") reason mask."""
    if nvml is None:
        import pynvml as nvml  # noqa: PLC0415 - lazy: NVML is optional
    names = set()
    for attr in dir(nvml):
        short = attr.removeprefix("nvmlClocksEventReason").removeprefix("nvmlClocksThrottleReason")
        bit = getattr(nvml, attr)
        if short != attr and short not in ("All", "None", "Unknown") and isinstance(bit, int) and bit and mask & bit == bit:
            names.add(short)
    return sorted(names)


def time_interleaved(calls: dict[str, Callable[[], object]], rounds: int = 5, warmup_ms: float = 50,
                     rep_ms: float = 200, progress: bool = False) -> dict[str, dict]:
    """Time every call once per round, in the same order; per call: ``summarize`` and each round's NVML ``summary``."""
    from triton.testing import do_bench  # noqa: PLC0415 - lazy: triton is optional where nothing is timed

    samples: dict[str, list[list[float]]] = {name: [] for name in calls}
    nvml: dict[str, list[dict]] = {name: [] for name in calls}
    sampler = NvmlSampler()
    bar = tqdm(total=rounds * len(calls), desc="timing (interleaved rounds)", unit="entry", disable=not progress)
    for _ in range(rounds):
        for name, fn in calls.items():
            with sampler:
                times = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
            samples[name].append([float(t) for t in times])
            nvml[name].append(sampler.summary())
            bar.update()
    bar.close()
    return {name: {**summarize(samples[name]), "nvml": nvml[name]} for name in calls}


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

