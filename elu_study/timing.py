"""Timing with CUDA events through triton.testing.do_bench: warm-up, L2 flush, many runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import torch


@dataclass
class Timing:
    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    runs: int
    round_medians_ms: list[float]  # one median per round: their spread is the run-to-run noise

    def to_dict(self) -> dict:
        return asdict(self)


def time_ms(fn: Callable[[], object], rounds: int = 2, warmup_ms: float = 100, rep_ms: float = 500) -> Timing:
    """Median of many CUDA-event-timed calls, in ``rounds`` separate batches.

    do_bench warms up, then times each call with its own pair of events and
    flushes the L2 cache between calls, so no call finds its data in L2.
    """
    from triton.testing import do_bench

    samples: list[float] = []
    medians: list[float] = []
    for _ in range(rounds):
        times = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
        samples += times
        medians.append(float(torch.tensor(times).median()))
    t = torch.tensor(samples, dtype=torch.float64)
    q = torch.quantile(t, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64))
    return Timing(float(q[1]), float(q[0]), float(q[2]), float(t.min()), len(samples), medians)
