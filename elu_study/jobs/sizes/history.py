"""CUB's history effect: its time at the main study's length depends on the length of its first call in the process.

``cub::DeviceTransform`` (CCCL as shipped with CUDA 13.0, ``cub/device/dispatch/dispatch_transform.cuh``) picks its
bulk-copy kernel's tile on the first call of a process and keeps it in a function-local ``static``: the loop that
grows the items per thread until enough bytes are in flight stops early once a tile covers that first call's length.
A first call on a few hundred elements pins a small tile for every later call, however long (fixed upstream in
NVIDIA/cccl pull request 5112, "Rebalance items per thread", after this CCCL). So every job here makes a peer's
first call at the main length (``measure.prime``), and this module shows the effect: for each length in ``FIRSTS``,
a fresh process (``python -m elu_study.jobs.sizes.history``) calls CUB once on that many elements, then checks and
times CUB and ``copy_`` at the main length in interleaved rounds, and reads the grid CUB launched (the profiler's
kernel record): the main length over the grid is the tile CUB kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

ENTRY = "cub_transform"
NAMES = (ENTRY, "copy_")
FIRSTS = (256, 1024, None)  # the first call's length; None: the main study's length (what every job does)
ROUNDS = 3


def launch(call) -> dict | None:
    """The grid and block of the last kernel ``call`` launches, from the profiler's trace (None: not recorded)."""
    import torch  # noqa: PLC0415
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp, "trace.json")
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text()).get("traceEvents", [])
    kernels = [e["args"] for e in events if e.get("cat") == "kernel" and "grid" in e.get("args", {})]
    return {"grid": kernels[-1]["grid"][0], "block": kernels[-1]["block"][0]} if kernels else None


def child(path: Path, numel: int | None) -> int:
    """One fresh process: CUB's first call on ``numel`` elements (None: the main study's length), then NAMES checked
    and timed at the main length, and the grid CUB launched there."""
    import torch  # noqa: PLC0415 - the child's GPU work only

    from elu_study.core.entries import ALPHA, ENTRIES  # noqa: PLC0415
    from elu_study.core.hardware import SHAPE  # noqa: PLC0415
    from elu_study.core.harness import input_tensor, measure  # noqa: PLC0415

    first = torch.randn(numel or SHAPE[0] * SHAPE[1], device="cuda")
    ENTRIES[ENTRY].build().elu(first, ALPHA, out=torch.empty_like(first))
    torch.cuda.synchronize()
    timed = {r["name"]: r for r in measure([ENTRIES[n] for n in NAMES], trials=1, rounds=ROUNDS)["rows"]}
    x = input_tensor()
    y = torch.empty_like(x)
    path.write_text(json.dumps({
        "first_numel": numel or x.numel(), "main_numel": x.numel(), "passed": bool(timed[ENTRY]["check"]["passed"]),
        **{f"{key}_ms": {k: timed[name]["timing"][k] for k in ("median_ms", "p10_ms", "p90_ms", "round_medians_ms")}
           for key, name in (("cub", ENTRY), ("copy", "copy_"))},
        "launch": launch(lambda: ENTRIES[ENTRY].build().elu(x, ALPHA, out=y)),
    }))
    return 0


def measure_history(firsts=FIRSTS) -> list[dict]:
    """One fresh process per first length: the rows of the sizes record's ``cub_history``."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, numel in enumerate(tqdm(firsts, desc="CUB's first call", unit="process")):
            path = Path(tmp, f"first{k}.json")
            subprocess.run([sys.executable, "-m", "elu_study.jobs.sizes.history", str(path),
                            *(["--first", str(numel)] if numel is not None else [])],
                           check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            rows.append(json.loads(path.read_text()))  # a scratch file: the record holds the rows
    return rows


if __name__ == "__main__":  # PATH [--first N]: the row to a scratch file; N, the first call's length (default: main)
    sys.exit(child(Path(sys.argv[1]), int(sys.argv[3]) if len(sys.argv) > 3 else None))
