"""The host's cost per call (GPU): each route to ELU timed on the wall clock at small sizes, and where a call's
host time goes (a torch.profiler breakdown).

Method (the size sweep's idea, jobs/sizes, written again here: a job imports no other job): ``HOST_CALLS``
back-to-back calls while a sleep kernel holds the GPU busy, so that no call waits for the GPU and only the
host's time is counted; per-call means of ``HOST_REPEATS`` such loops, every route and size interleaved in
each repeat. On the CPU (the dry run of tests/test_library.py) there is no sleep kernel.

The routes: ``F.elu``; the binding (``module.elu``, no PyTorch layer); the custom op's dispatch
(``torch.ops.elu_study.elu``, what ``library.elu`` called before its eager route existed: "before"); and
``library.elu`` now ("after": the binding, or ``KernelELU`` where a gradient is needed, behind a few checks);
the modules ``nn.ELU`` and ``elu_study.ELU``; and the same without and with ``requires_grad``.
"""

from __future__ import annotations

import re
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from elu_study.core.timing import sleep_cycles_per_ms
from elu_study.pytorch import library
from elu_study.pytorch.nn import ELU

HOST_SIZES = tuple(2**k for k in range(10, 17))
HOST_CALLS, HOST_REPEATS = 200, 7
PROFILE_SIZE, PROFILE_CALLS, PROFILE_TOP = 2**16, 20, 12
PROFILE_MARK = "elu-study: one call"
BEFORE, AFTER = "op dispatch (before)", "library.elu (after)"
BEFORE_GRAD, AFTER_GRAD = "op dispatch, requires_grad (before)", "library.elu, requires_grad (after)"
PROFILED = ("F.elu", "binding", BEFORE, AFTER, "F.elu, requires_grad", BEFORE_GRAD, AFTER_GRAD)


class Busy:
    """A calibrated sleep kernel that holds the GPU while the host enqueues (nothing on the CPU)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.cycles_per_ms = 0.0
        if not self.cuda:
            return
        self.cycles_per_ms = sleep_cycles_per_ms()

    def sleep(self, ms: float) -> None:
        if self.cuda:
            torch.cuda._sleep(max(1, int(ms * self.cycles_per_ms)))

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def routes(variant: str, alpha: float) -> dict:
    """name -> (what it is, a function of (x, x requiring grad) giving the call)."""
    module = library.module_for(variant)
    theirs, ours = nn.ELU(alpha), ELU(alpha, variant=variant)
    return {
        "F.elu": ("PyTorch's functional ELU", lambda x, xg: lambda: F.elu(x, alpha)),
        "binding": (f"module.elu of {variant}'s build: the pybind11 call alone",
                    lambda x, xg: lambda: module.elu(x, alpha)),
        BEFORE: ("torch.ops.elu_study.elu: the custom op's dispatch, every call's route before this change",
                 lambda x, xg: lambda: library.elu_op(x, alpha, variant, False)),
        AFTER: ("library.elu: the eager route (checks, then the binding)",
                lambda x, xg: lambda: library.elu(x, alpha, variant)),
        "nn.ELU module": ("nn.ELU()(x)", lambda x, xg: lambda: theirs(x)),
        "elu_study.ELU module": ("elu_study.ELU()(x)", lambda x, xg: lambda: ours(x)),
        "F.elu, requires_grad": ("F.elu on a leaf that requires grad (forward only)",
                                 lambda x, xg: lambda: F.elu(xg, alpha)),
        BEFORE_GRAD: ("the custom op with autograd (forward only)",
                      lambda x, xg: lambda: library.elu_op(xg, alpha, variant, False)),
        AFTER_GRAD: ("library.elu: KernelELU, an autograd.Function around the binding (forward only)",
                     lambda x, xg: lambda: library.elu(xg, alpha, variant)),
    }


def loop_ms(call, calls: int, busy: Busy, guess_ms: float) -> tuple[float, bool]:
    """Per-call wall time (ms) of ``calls`` calls enqueued behind a sleep; whether the sleep outlasted them."""
    busy.sync()
    busy.sleep(calls * guess_ms * 2 + 0.2)
    asleep = torch.cuda.Event() if busy.cuda else None
    if asleep is not None:
        asleep.record()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    t1 = time.perf_counter()
    held = asleep is None or not asleep.query()
    busy.sync()
    return (t1 - t0) * 1e3 / calls, held


def inputs(sizes, device) -> dict:
    gen = torch.Generator(device=device).manual_seed(3)
    xs = {n: torch.randn(n, device=device, generator=gen) * 4 for n in sizes}
    return {n: (x, x.clone().requires_grad_()) for n, x in xs.items()}


def measure_host(variant: str, alpha: float, device, sizes=HOST_SIZES, calls: int = HOST_CALLS,
                 repeats: int = HOST_REPEATS, progress=None) -> dict:
    """Every route's host time per call at every size (µs): median and p10-p90 of the repeats' means."""
    device = torch.device(device)
    busy, table, data = Busy(device), routes(variant, alpha), inputs(sizes, device)
    calls_of = {(r, n): make(*data[n]) for r, (_, make) in table.items() for n in sizes}
    for call in calls_of.values():  # warm: built, cached, allocator primed
        for _ in range(3):
            call()
    means = {key: [] for key in calls_of}
    guess = {key: 0.05 for key in calls_of}
    held = 0
    for _ in range(repeats):
        for key, call in calls_of.items():
            ms, ok = loop_ms(call, calls, busy, guess[key])
            means[key].append(ms * 1e3)
            guess[key], held = ms, held + ok
        if progress is not None:
            progress.update()
    out = {r: {"what": what, "us": {}} for r, (what, _) in table.items()}
    for (r, n), us in means.items():
        out[r]["us"][str(n)] = {"median": float(np.median(us)), "p10": float(np.percentile(us, 10)),
                                "p90": float(np.percentile(us, 90)), "repeats": us}
    return {"sizes": list(sizes), "calls_per_loop": calls, "repeats": repeats, "loops_gpu_held": held,
            "loops": repeats * len(calls_of), "routes": out}


def event_name(name: str) -> str:
    """A profiler event's name without what differs between machines and runs: the path up to a package
    (``.../site-packages/torch/_ops.py(910): __call__`` -> ``torch/_ops.py(910): __call__``) and addresses."""
    name = re.sub(r" at 0x[0-9a-fA-F]+", "", name)
    return re.sub(r"^.*?/((?:torch|elu_study)/)", r"\1", name)


def ancestors_marked(event) -> bool:
    while event is not None:
        if event.name == PROFILE_MARK:
            return True
        event = event.cpu_parent
    return False


def profile_call(call, device, calls: int = PROFILE_CALLS, top: int = PROFILE_TOP) -> dict:
    """Where one call's host time goes: torch.profiler (with Python stacks) over ``calls`` marked calls;
    the events under the mark, by name, self time per call (µs), most first. The profiler's own cost
    inflates every number; the shares are what it tells."""
    for _ in range(3):
        call()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.device(device).type == "cuda" else [])
    with profile(activities=activities, with_stack=True) as prof:
        for _ in range(calls):
            with record_function(PROFILE_MARK):
                call()
    by_name: dict[str, dict] = {}
    marked_us = 0.0
    for e in prof.events():
        if e.device_type.name != "CPU" or not ancestors_marked(e):
            continue
        if e.name == PROFILE_MARK:
            marked_us += e.cpu_time_total
            continue
        name = event_name(e.name)
        row = by_name.setdefault(name, {"name": name, "count": 0, "self_us": 0.0})
        row["count"] += 1
        row["self_us"] += e.self_cpu_time_total
    rows = sorted(by_name.values(), key=lambda r: -r["self_us"])[:top]
    for r in rows:
        r["count"] /= calls
        r["self_us"] /= calls
    return {"calls": calls, "profiled_us_per_call": marked_us / calls, "top": rows}


def profile_routes(variant: str, alpha: float, device, size: int = PROFILE_SIZE) -> dict:
    table = routes(variant, alpha)
    x, xg = inputs([size], torch.device(device))[size]
    return {"size": size, "calls": PROFILE_CALLS,
            "routes": {r: profile_call(table[r][1](x, xg), device) for r in PROFILED}}
