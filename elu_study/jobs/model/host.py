"""What one call costs the host, route by route (``host_cost``): ``CALLS`` calls back to back per timing
(``torch.utils.benchmark``: it synchronizes CUDA and turns the garbage collector off), the routes interleaved
in ``REPEATS`` rounds so that the host's drift reaches all alike."""

import os
import statistics

import torch
import torch.nn.functional as F
from torch import nn

from elu_study.pytorch import ops
from elu_study.pytorch.nn import ELU

SIZES = (2**10, 2**16, 2**20)
CALLS, REPEATS, WARMUP = 2000, 15, 300


def time_group(numel: int, requires_grad: bool, autocast: bool) -> list:
    from torch.utils import benchmark  # noqa: PLC0415 - lazy: it imports cpp_extension, which warns on stderr without a GPU

    # Under bfloat16 autocast ELU meets what a Linear layer gives it there: a bfloat16 tensor.
    dtype = torch.bfloat16 if autocast else torch.float32
    x = torch.randn(numel, device="cuda", dtype=dtype, requires_grad=requires_grad)
    binding = ops.module_for(None) if dtype is torch.float32 else ops.sixteen_bit_module()  # the dtype's default build
    routes = {"nn.ELU": nn.ELU(), "F.elu": F.elu, "binding": lambda x: binding.elu(x, 1.0), "elu_study.ELU": ELU()}
    timers = {r: benchmark.Timer("f(x)", globals={"f": f, "x": x}) for r, f in routes.items()}
    runs = {r: [] for r in timers}
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        for t in timers.values():
            t.timeit(WARMUP)
        for _ in range(REPEATS):
            for r, t in timers.items():
                runs[r].append(t.timeit(CALLS).mean * 1e6)
    return [{"route": r, "numel": numel, "requires_grad": requires_grad, "autocast": autocast,
             "us_per_call": statistics.median(v), "us_runs": v} for r, v in runs.items()]


def measure_host() -> list[dict]:
    """host_cost: a row per (route, numel, requires_grad, autocast), timed on one CPU core (no migration mid-repeat)."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        time_group(SIZES[0], True, False)  # untimed: the first group timed ran 1.3-1.5x slower than later ones
        return [row for numel in SIZES for grad in (False, True) for autocast in (False, True)
                for row in time_group(numel, grad, autocast)]
    finally:
        os.sched_setaffinity(0, allowed)

