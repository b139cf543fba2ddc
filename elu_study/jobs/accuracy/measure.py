"""The sweep: bit-pattern ranges through every formula at every alpha (GPU; CPU stand-ins in the tests)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm  # text bars: tqdm.auto warns on stderr in a notebook without ipywidgets

from elu_study.core.build import compile_variant
from elu_study.core.harness import quiet
from elu_study.jobs.accuracy.accumulate import Accumulator, Chunk
from elu_study.jobs.accuracy.definitions import ALPHAS, BINADE, CHUNK_LOG2, FORMULAS, MIDPOINT_MARGIN_ULP64, SAME_AS
from elu_study.jobs.accuracy.reference import (bits32, check_reference, correctly_rounded_elu, patterns, reference,
                                               reference_sample)


def build_evaluators(formulas, same_as) -> dict[str, Callable]:
    """{name: (x, alpha) -> y} for each formula and each build of SAME_AS, from the built kernels."""
    library = {"F.elu": lambda: F.elu, "torch.compile(F.elu)": lambda: torch.compile(F.elu)}
    if unknown := [f.name for f in formulas if not f.variant and f.name not in library]:
        raise ValueError(f"no way to run formulas {unknown}")
    return ({f.name: compile_variant(f.variant).elu if f.variant else library[f.name]() for f in formulas}
            | {name: compile_variant(name).elu for name in same_as})


def chunk_ranges(ranges, chunk_log2: int) -> list[tuple[int, int]]:
    """The ranges cut into chunks of at most 2^chunk_log2 inputs, each in whole binades, none straddling 0."""
    chunk = 1 << chunk_log2
    starts = []
    for lo, hi in ranges:
        step = min(chunk, hi - lo)
        if step < BINADE or lo % BINADE or (hi - lo) % step or (lo < 0 < hi and lo % step):
            raise ValueError(f"[{lo}, {hi}) in chunks of {step}: chunks must be whole binades (2^23) and not straddle 0")
        patterns(lo, lo + 1)  # checks the range's bounds
        starts += [(s, s + step) for s in range(lo, hi, step)]
    return starts


def measure(alphas=ALPHAS, formulas=FORMULAS, same_as=SAME_AS, *, ranges=((-(2**31), 2**31),),
            chunk_log2: int = CHUNK_LOG2, device="cuda", evaluators: dict[str, Callable] | None = None,
            progress: bool = True) -> dict:
    """The record's body (no provenance): method, formulas, one run per alpha. ranges: [lo, hi) int32
    bit-pattern ranges in whole binades (default: all 2^32); evaluators: {name: (x, alpha) -> y} instead of kernels."""
    starts = chunk_ranges(ranges, chunk_log2)
    chunk = max(hi - lo for lo, hi in starts)
    same_as = {k: v for k, v in same_as.items() if v in {f.name for f in formulas}}
    with quiet():
        fns = evaluators if evaluators is not None else build_evaluators(formulas, same_as)
        warm = torch.zeros(chunk, dtype=torch.float32, device=device)  # torch.compile compiles on its first call
        for alpha in alphas:
            for name in [*(f.name for f in formulas), *same_as]:
                fns[name](warm, alpha)
        del warm
        bar = tqdm(total=len(alphas) * len(starts), desc="every float32 input", unit="chunk", disable=not progress)
        runs = {repr(float(alpha)): run_alpha(alpha, starts, formulas, same_as, fns, device, bar) for alpha in alphas}
        bar.close()
    n_inputs = sum(hi - lo for lo, hi in starts)
    return {"method": {"n_inputs": n_inputs, "every_input": n_inputs == 2**32, "alphas": list(alphas)},
            "formulas": [dataclasses.asdict(f) for f in formulas], "runs": runs}


def run_alpha(alpha: float, starts, formulas, same_as: dict, fns: dict[str, Callable], device, bar) -> dict:
    """Every chunk through every formula at one alpha: the run's reference summary, same_as and formulas."""
    ref_stats = {"near_midpoint": 0, "exact_ties_tiny_x": 0, "ties_corrected": 0, "resolved": 0,
                 "corrected": 0, "unresolved": 0, "tie_sample": []}
    acc = {f.name: Accumulator(f, device) for f in formulas}
    differ = {name: torch.zeros((), dtype=torch.int64, device=device) for name in same_as}
    for start, stop in starts:
        c = Chunk(start, stop, alpha, device, ref_stats)
        for f in formulas:
            y = c.felu if f.name == "F.elu" else fns[f.name](c.x, alpha)
            for name, target in same_as.items():
                if target == f.name:
                    differ[name] += (bits32(fns[name](c.x, alpha)) != bits32(y)).sum()
            acc[f.name].update(y, c)
            del y
        del c
        bar.set_postfix(alpha=alpha)
        bar.update()
    return {
        "reference": reference_summary(ref_stats, alpha, device),
        "same_as": {name: {"as": target, "n_differ": int(differ[name])} for name, target in same_as.items()},
        "formulas": {name: a.to_dict() for name, a in acc.items()},
    }


def reference_summary(s: dict, alpha: float, device) -> dict:
    """The reference's counts, its tie rule checked on a sample of ties, and float64 checked on a random sample."""
    ties = s.pop("tie_sample")
    disagree = 0
    if ties:
        x = torch.tensor(ties, dtype=torch.float32, device=device)
        got = reference(x, alpha).ref32.cpu().numpy()
        want = np.array([correctly_rounded_elu(v, alpha) for v in ties], dtype=np.float32)
        disagree = int((got.view(np.int32) != want.view(np.int32)).sum())
    return {"margin_ulp64": MIDPOINT_MARGIN_ULP64, **s, "tie_check": {"n": len(ties), "disagree": disagree},
            "sample_check": check_reference(reference_sample(device=device), alpha)}

