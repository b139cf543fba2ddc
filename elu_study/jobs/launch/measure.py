"""The measurement (GPU): one build of the sweep's kernel, every cell checked, then every cell and the references
timed in interleaved rounds; the record that ``python -m elu_study launch`` saves."""

from __future__ import annotations

from dataclasses import asdict

import torch
from tqdm import tqdm

from elu_study.core.build import build_all, built_library, compile_variant
from elu_study.core.check import check_elu
from elu_study.core.hardware import SHAPE, gpu_spec, provenance
from elu_study.core.harness import input_tensor
from elu_study.core.sass import resource_usage
from elu_study.core.timing import time_interleaved
from elu_study.jobs.launch.analysis import annotate
from elu_study.jobs.launch.shapes import ALPHA, VARIANT, Cell, occupancy

# How the record was measured, as the record says it (beside rounds, warm-up, repeats and check trials).
METHOD = {
    "check": "check.check_elu (randn x 4, NaN-poisoned output, atol = rtol = 1e-4) on fresh inputs, and the "
             "output on the timing input compared bit for bit with 2_float4's",
    "timed_call": "module.set_launch_shape(threads, vectors, hints, blocks_per_sm); module.elu(x, 1.0, out=y) "
                  "(setting the shape is host-only: a table lookup, not in the CUDA-event time)",
    "noise": "per entry, the spread (max - min) of its round medians (timing.noise_ms)",
    "occupancy": "from each instance's registers (cuobjdump resource usage): 2048 threads, 32 blocks and "
                 "65536 registers per SM, registers allocated per warp in units of 256",
}


def registers_by_cell(module, cells) -> dict[str, dict]:
    """Registers and local bytes of each cell's kernel, from the built library's resource report."""
    usage = resource_usage(built_library(module))
    out = {}
    for cell in cells:
        found = [v for k, v in usage.items() if cell.kernel_pattern() in k]
        if len(found) != 1:
            raise RuntimeError(f"{cell.name}: expected one kernel matching {cell.kernel_pattern()}, found {len(found)}")
        out[cell.name] = found[0]
    return out


def builds(cells: list[Cell]):
    """The sweep's build and step 2's (compiled at once), after checking that every cell has an instance."""
    build_all([(VARIANT, ()), ("2_float4", ())])
    module, step2 = compile_variant(VARIANT), compile_variant("2_float4")
    instances = set(map(tuple, module.launch_shapes()))
    missing = [c.name for c in cells if c.instance() not in instances]
    if missing:
        raise RuntimeError(f"cells with no instance in {VARIANT}.cu: {missing}")
    return module, step2


def shaped(module, c: Cell):
    """The cell as an elu(x, alpha, out) function: set its launch shape, then call the build."""
    def fn(x, alpha, out):
        module.set_launch_shape(*c.args())
        return module.elu(x, alpha, out=out)
    return fn


def check_cells(module, step2, cells: list[Cell], x, y, *, shape, check_trials: int) -> tuple[list[dict], dict]:
    """Each cell's row (check, bit-identity with step 2 on the timing input, occupancy), and step 2's check."""
    regs = registers_by_cell(module, cells)
    expected = step2.elu(x, ALPHA)
    rows = []
    step2_check = check_elu(lambda x_, a, out: step2.elu(x_, a, out=out), shape=shape, alpha=ALPHA,
                            trials=check_trials).to_dict()
    for c in tqdm(cells, desc="checking", unit="cell"):
        check = check_elu(shaped(module, c), shape=shape, alpha=ALPHA, trials=check_trials).to_dict()
        y.fill_(float("nan"))
        shaped(module, c)(x, ALPHA, y)
        torch.cuda.synchronize()
        identical = bool(torch.equal(y, expected))
        usage = regs[c.name]
        rows.append({"name": c.name, **asdict(c), "grid_stride": c.grid_stride, "check": check,
                     "bit_identical_to_2_float4": identical, "correct": check["passed"] and identical,
                     "occupancy": occupancy(c, usage["registers"]), "local_bytes": usage["local"]})
    del expected
    torch.cuda.empty_cache()
    return rows, step2_check


def time_cells(module, step2, cells: list[Cell], x, y, *, rounds: int, warmup_ms: float, rep_ms: float) -> dict:
    """copy_, 2_float4 and every cell timed in interleaved rounds; the build's shape set back to step 2's."""
    def timed(c: Cell):
        args = c.args()
        return lambda: (module.set_launch_shape(*args), module.elu(x, ALPHA, out=y))

    calls = {"copy_": lambda: y.copy_(x), "2_float4": lambda: step2.elu(x, ALPHA, out=y)}
    calls.update({c.name: timed(c) for c in cells})
    timings = time_interleaved(calls, rounds=rounds, warmup_ms=warmup_ms, rep_ms=rep_ms, progress=True)
    module.set_launch_shape(256, 1, False, 0)  # back to the default (step 2's)
    return timings


def measure(cells: list[Cell], *, rounds: int, warmup_ms: float, rep_ms: float, check_trials: int,
            shape=SHAPE) -> dict:
    """Check and time every cell on this GPU: the annotated record (core.record.save stamps its schema)."""
    module, step2 = builds(cells)
    x = input_tensor(shape)
    y = torch.empty_like(x)
    rows, step2_check = check_cells(module, step2, cells, x, y, shape=shape, check_trials=check_trials)
    timings = time_cells(module, step2, cells, x, y, rounds=rounds, warmup_ms=warmup_ms, rep_ms=rep_ms)
    for r in rows:
        r["timing"] = timings[r["name"]]
    del x, y  # release the tensors before the record is written
    torch.cuda.empty_cache()
    prov = provenance()
    spec = gpu_spec(prov["gpu"])
    record = {
        "provenance": prov,
        "problem": {"shape": list(shape), "dtype": "float32", "alpha": ALPHA, "numel": shape[0] * shape[1]},
        "peak_bytes_per_s": spec.peak_bytes_per_s if spec else None,
        "peak_source": f"{spec.label} {spec.source}" if spec else None,
        "kernel": f"kernels/{VARIANT}.cu",
        "method": {"rounds": rounds, "warmup_ms": warmup_ms, "rep_ms": rep_ms, "interleaved": True,
                   "check_trials": check_trials, **METHOD},
        "references": {
            "copy_": {"what": "y.copy_(x): the same bytes, no math (the measured roof)", "timing": timings["copy_"]},
            "2_float4": {"what": "step 2's own build (256 x 1, no hints)", "check": step2_check,
                         "timing": timings["2_float4"]},
        },
        "cells": rows,
    }
    return annotate(record)
