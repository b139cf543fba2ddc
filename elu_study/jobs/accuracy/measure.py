"""The sweep: bit-pattern ranges through every formula at every alpha (GPU; CPU stand-ins in the tests), a chunk of
inputs with its reference at a time (Chunk), summed per formula and alpha (Accumulator)."""

import dataclasses
import math
from collections import Counter
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from elu_study.core.build import compile_variant
from elu_study.core.harness import quiet
from elu_study.jobs.accuracy.definitions import (ALPHAS, BINADE, CHUNK_LOG2, CLASSES, FLAGS, FORMULAS, MAX_DECIMAL,
                                                 MIDPOINT_MARGIN_ULP64, N_GROUPS, SAME_AS, TOL, Formula)
from elu_study.jobs.accuracy.reference import (bits32, bound_parts, check_reference, classify, correctly_rounded_elu,
                                               patterns, predicted_ulp, reference, reference_sample, resolve, ulp_error)

COMBOS = 1 << len(FLAGS)  # an input's outcome: one bit per flag


class Chunk:
    """One range of inputs with everything that does not depend on the formula."""

    def __init__(self, lo: int, hi: int, alpha: float, device, ref_stats: Counter):
        self.lo, self.alpha, self.rows = lo, alpha, (hi - lo) // BINADE
        group0 = (lo % 2**32) >> 23  # (sign << 8) | exponent field of the chunk's first binade
        self.groups = slice(group0, group0 + self.rows)
        self.x = patterns(lo, hi, device)
        ref = reference(self.x, alpha)
        ref_stats.update(near_midpoint=int(ref.near.sum()), exact_ties_tiny_x=int(ref.tie.sum()),
                         ties_corrected=int((ref.tie & (bits32(ref.ref32) != bits32(ref.ref64.float()))).sum()))
        if ref.tie.any():  # sample the ties (the first of each binade) for an exact check
            ties = ref.tie.view(self.rows, BINADE)
            rows = ties.any(1).nonzero().flatten()
            ref_stats["tie_sample"] += self.x[rows * BINADE + ties.to(torch.uint8).argmax(1)[rows]].cpu().tolist()
        if ref.todo.any():
            ref_stats.update(resolve(self.x, ref, alpha, MAX_DECIMAL - ref_stats["resolved"]))
        self.ref64, self.r32b, self.ref_nan = ref.ref64, bits32(ref.ref32), torch.isnan(ref.ref64)
        del ref  # its masks: not held through the formulas
        self.felu = F.elu(self.x, alpha)
        self.felub = bits32(self.felu)
        self.parts = bound_parts(self.x, self.ref64)
        self.finite, self.cls = self.parts["finite"], classify(self.x)


class Accumulator:
    """Everything recorded for one formula at one alpha, accumulated chunk by chunk (on the device)."""

    COUNTS = ("n_exceed_bound", "tolerance_checked", "tolerance_failed")  # the rest: sums over the classes

    def __init__(self, formula: Formula, device):
        self.formula = formula
        z = lambda *s, dt=torch.int64: torch.zeros(*s, dtype=dt, device=device)  # noqa: E731
        self.counts = z(len(self.COUNTS))
        self.classes = z(len(CLASSES) * COMBOS)
        self.binade = {k: z(N_GROUPS, dt=torch.float64) for k in ("max_ulp", "predicted_max_ulp")}
        self.max_ulp, self.max_ratio = {"negative": None, "positive": None}, None

    def update(self, y: torch.Tensor, c: Chunk):
        """Add one chunk's outputs of this formula: counts, per-binade figures and maxima."""
        # Each output against the reference, the documented bound carried through ELU, and F.elu.
        y = y.contiguous()
        yb, err, y_nan, g = bits32(y), ulp_error(y, c.ref64), torch.isnan(y), c.groups
        inf_err = torch.isinf(err) & c.finite
        err.masked_fill_(torch.isinf(err), 0.0)  # maxima are over finite errors; infinite ones exceed the bound
        pred = predicted_ulp(c.x, c.ref64, c.alpha, self.formula, c.parts)
        self.binade["predicted_max_ulp"][g] = torch.maximum(self.binade["predicted_max_ulp"][g],
                                                            pred.view(c.rows, -1).amax(1))
        exceed = ((err > pred * (1 + 1e-12) + 1e-9) & c.finite) | inf_err
        del pred
        ratio = (y.double() - c.felu.double()).abs_().div_(c.felu.double().abs_().mul_(TOL).add_(TOL))
        ratio = torch.where(c.finite, ratio.masked_fill_(torch.isnan(ratio), math.inf), 0.0)  # over the task's bar
        fail = ~torch.isclose(y, c.felu, rtol=TOL, atol=TOL) & c.finite
        cr, identical = (yb == c.r32b) | (y_nan & c.ref_nan), yb == c.felub

        # The chunk's totals, and its inputs by class and by what came out (FLAGS, one bit each).
        self.counts += torch.stack([exceed.sum(), c.finite.sum(), fail.sum()])
        flags = cr.to(torch.int32) | identical.to(torch.int32) << 1 | (yb == 0).to(torch.int32) << 2
        self.classes += torch.bincount(c.cls * COMBOS + flags, minlength=len(CLASSES) * COMBOS)
        del flags  # not held through the maxima: the chunk's peak memory

        # Per binade of the chunk the largest error; the running maxima (ulp error by sign, the task's bar), in one
        # transfer.
        self.binade["max_ulp"][g] = torch.maximum(self.binade["max_ulp"][g], err.view(c.rows, -1).amax(1))
        worst, ratio_max = torch.stack([err.max(), ratio.max()]).tolist()
        sign = "negative" if c.lo < 0 else "positive"
        self.max_ulp[sign] = max(worst, self.max_ulp[sign] or 0.0)
        if c.finite.any():
            self.max_ratio = max(ratio_max, self.max_ratio or 0.0)

    def to_dict(self) -> dict:
        counts = dict(zip(self.COUNTS, self.counts.tolist()))
        per_class = self.classes.view(len(CLASSES), COMBOS).cpu()
        has_flag = (torch.arange(COMBOS)[:, None] >> torch.arange(len(FLAGS))) & 1  # combo x flag: 0 or 1
        class_stats = {label: {"n": n, **dict(zip(FLAGS, flags))} for label, n, flags
                       in zip(CLASSES, per_class.sum(1).tolist(), (per_class @ has_flag).tolist()) if n}
        every = {key: sum(c[key] for c in class_stats.values()) for key in ("n", *FLAGS)}
        return {
            "n": every["n"],
            "max_ulp": {sign: None if v is None else {"ulp": v} for sign, v in self.max_ulp.items()},
            "correctly_rounded": every["correctly_rounded"], "bit_identical_to_felu": every["identical_to_felu"],
            "tolerance": {"n_checked": counts["tolerance_checked"], "n_fail": counts["tolerance_failed"],
                          "max_ratio": self.max_ratio},
            "bound": {"exponential": self.formula.exponential, "documented": self.formula.documented_bound,
                      "n_exceed": counts["n_exceed_bound"]},
            "classes": class_stats,
            "binades_negative": {k: [float(f"{v:.5g}") for v in t[256:].tolist()] for k, t in self.binade.items()},
        }


def build_evaluators(formulas, same_as) -> dict[str, Callable]:
    """{name: (x, alpha) -> y} for each formula and each build of SAME_AS, from the built kernels."""
    library = {"F.elu": F.elu, "torch.compile(F.elu)": torch.compile(F.elu)}  # compiles on its first call
    return ({f.name: compile_variant(f.variant).elu if f.variant else library[f.name] for f in formulas}
            | {name: compile_variant(name).elu for name in same_as})


def measure(alphas=ALPHAS, formulas=FORMULAS, same_as=SAME_AS, *, ranges=((-(2**31), 2**31),),
            chunk_log2: int = CHUNK_LOG2, device="cuda", evaluators: dict[str, Callable] | None = None) -> dict:
    """The record's body (no provenance): method, formulas, one run per alpha. ranges: [lo, hi) int32
    bit-pattern ranges in whole binades (default: all 2^32); evaluators: {name: (x, alpha) -> y} instead of kernels."""
    starts = []  # the ranges in chunks of at most 2^chunk_log2 inputs, each in whole binades, none straddling 0
    for lo, hi in ranges:
        step = min(1 << chunk_log2, hi - lo)
        if step < BINADE or lo % BINADE or (hi - lo) % step or (lo < 0 < hi and lo % step):
            raise ValueError(f"[{lo}, {hi}) in chunks of {step}: chunks must be whole binades (2^23) and not straddle 0")
        patterns(lo, lo + 1)  # checks the range's bounds
        starts += [(s, s + step) for s in range(lo, hi, step)]
    chunk = max(hi - lo for lo, hi in starts)
    same_as = {k: v for k, v in same_as.items() if v in {f.name for f in formulas}}
    with quiet():
        fns = evaluators if evaluators is not None else build_evaluators(formulas, same_as)
        warm = torch.zeros(chunk, dtype=torch.float32, device=device)  # torch.compile compiles on its first call
        for alpha in alphas:
            for name in [*(f.name for f in formulas), *same_as]:
                fns[name](warm, alpha)
        del warm
        runs = {repr(float(alpha)): run_alpha(alpha, starts, formulas, same_as, fns, device) for alpha in alphas}
    n_inputs = sum(hi - lo for lo, hi in starts)
    return {"method": {"n_inputs": n_inputs, "every_input": n_inputs == 2**32, "alphas": list(alphas)},
            "formulas": [dataclasses.asdict(f) for f in formulas], "runs": runs}


def run_alpha(alpha: float, starts, formulas, same_as: dict, fns: dict[str, Callable], device) -> dict:
    """Every chunk through every formula at one alpha: the run's reference summary, same_as and formulas."""
    ref_stats = Counter(dict.fromkeys(("near_midpoint", "exact_ties_tiny_x", "ties_corrected", "resolved", "corrected",
                                       "unresolved"), 0) | {"tie_sample": []})
    acc = {f.name: Accumulator(f, device) for f in formulas}
    differ = {name: torch.zeros((), dtype=torch.int64, device=device) for name in same_as}
    for start, stop in starts:
        c = Chunk(start, stop, alpha, device, ref_stats)
        for f in formulas:
            y = c.felu if f.name == "F.elu" else fns[f.name](c.x, alpha)
            for name in (n for n, target in same_as.items() if target == f.name):
                differ[name] += (bits32(fns[name](c.x, alpha)) != bits32(y)).sum()
            acc[f.name].update(y, c)
            del y
        del c
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

