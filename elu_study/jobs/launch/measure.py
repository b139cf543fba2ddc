"""The GPU run: one build, every cell checked, then every cell and the references timed in interleaved rounds."""

from dataclasses import asdict, astuple
from functools import partial

import torch
from tqdm import tqdm

from elu_study.core.build import build_all, built_library, compile_variant
from elu_study.core.check import check_elu
from elu_study.core.hardware import SHAPE, provenance
from elu_study.core.harness import input_tensor
from elu_study.core.sass import resource_usage
from elu_study.core.text import render
from elu_study.core.timing import time_interleaved
from elu_study.jobs.launch.analysis import ALPHA, VARIANT, Cell, annotate, occupancy


def registers_by_cell(module, cells) -> dict[str, dict]:
    """Registers and local bytes of each cell's kernel, from the built library's resource report."""
    usage, out = resource_usage(built_library(module)), {}
    for c in cells:
        found = [v for k, v in usage.items() if c.kernel_pattern() in k]
        if len(found) != 1:
            raise RuntimeError(f"{c.name}: expected one kernel matching {c.kernel_pattern()}, found {len(found)}")
        out[c.name] = found[0]
    return out


def shaped(module, c: Cell, x, alpha, out):
    """One call of the cell: set its launch shape (host-only), then call the build."""
    module.set_launch_shape(*astuple(c))
    return module.elu(x, alpha, out=out)


def measure(cells: list[Cell], *, rounds: int, warmup_ms: float, rep_ms: float, check_trials: int) -> dict:
    """Check and time every cell on this GPU: the annotated record (core.record.save stamps its schema)."""
    build_all([(VARIANT, ()), ("2_float4", ())])
    module, step2 = compile_variant(VARIANT), compile_variant("2_float4")
    instances = set(map(tuple, module.launch_shapes()))
    if missing := [c.name for c in cells if c.instance() not in instances]:
        raise RuntimeError(f"cells with no instance in {VARIANT}.cu: {missing}")
    x = input_tensor()
    y = torch.empty_like(x)
    step2_check = check_elu(lambda x_, a, out: step2.elu(x_, a, out=out), alpha=ALPHA, trials=check_trials).to_dict()
    regs, expected, rows = registers_by_cell(module, cells), step2.elu(x, ALPHA), []
    for c in tqdm(cells, desc="checking", unit="cell"):  # each checked, then bit for bit step 2's on the timing input
        check = check_elu(partial(shaped, module, c), alpha=ALPHA, trials=check_trials).to_dict()
        y.fill_(float("nan"))
        shaped(module, c, x, ALPHA, y)
        torch.cuda.synchronize()
        identical = bool(torch.equal(y, expected))
        rows.append({"name": c.name, **asdict(c), "grid_stride": c.grid_stride, "check": check,
                     "bit_identical_to_2_float4": identical, "correct": check["passed"] and identical,
                     "occupancy": occupancy(c, regs[c.name]["registers"])})
    expected = None
    torch.cuda.empty_cache()
    calls = {"copy_": lambda: y.copy_(x), "2_float4": lambda: step2.elu(x, ALPHA, out=y),
             **{c.name: partial(shaped, module, c, x, ALPHA, y) for c in cells}}
    timings = time_interleaved(calls, rounds=rounds, warmup_ms=warmup_ms, rep_ms=rep_ms, progress=True)
    module.set_launch_shape(256, 1, False, 0)  # back to the default (step 2's)
    for r in rows:
        r["timing"] = timings[r["name"]]
    calls = x = y = None  # release the tensors before the record is written
    torch.cuda.empty_cache()
    how = dict(line.split(": ", 1) for line in render("launch/method.md.j2").splitlines())  # the method in words
    return annotate({
        "provenance": provenance(),
        "problem": {"shape": list(SHAPE), "dtype": "float32", "alpha": ALPHA, "numel": SHAPE[0] * SHAPE[1]},
        "method": {"rounds": rounds, "warmup_ms": warmup_ms, "rep_ms": rep_ms, "interleaved": True,
                   "check_trials": check_trials, **{k: how[k] for k in ("check", "timed_call", "noise", "occupancy")}},
        "references": {"copy_": {"what": how["copy_"], "timing": timings["copy_"]},
                       "2_float4": {"what": how["2_float4"], "check": step2_check, "timing": timings["2_float4"]}},
        "cells": rows,
    })
