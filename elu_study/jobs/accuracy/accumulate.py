"""The sweep's sums: a chunk of inputs with its reference (Chunk), and one formula at one alpha (Accumulator)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from elu_study.jobs.accuracy.definitions import (BINADE, CLASSES, DENORMAL_OUTPUT, FLAGS, MAX_DECIMAL, N_GROUPS, TOL,
                                                 Formula)
from elu_study.jobs.accuracy.reference import (bits32, bound_parts, classify, is_denormal, patterns, predicted_ulp,
                                               reference, resolve, ulp_error)

COMBOS = 1 << len(FLAGS)  # an input's outcome: one bit per flag


class Chunk:
    """One range of inputs with everything that does not depend on the formula."""

    def __init__(self, lo: int, hi: int, alpha: float, device, ref_stats: dict):
        self.lo, self.n, self.alpha = lo, hi - lo, alpha
        self.rows = self.n // BINADE
        group0 = (lo % 2**32) >> 23  # (sign << 8) | exponent field of the chunk's first binade
        self.groups = slice(group0, group0 + self.rows)
        self.x = patterns(lo, hi, device)
        self.xb = bits32(self.x)
        ref = reference(self.x, alpha)
        ref_stats["near_midpoint"] += int(ref.near.sum())
        n_tie = int(ref.tie.sum())
        ref_stats["exact_ties_tiny_x"] += n_tie
        ref_stats["ties_corrected"] += int((ref.tie & (bits32(ref.ref32) != bits32(ref.ref64.float()))).sum())
        if n_tie:  # sample the ties (the first of each binade) for an exact check
            first = ref.tie.view(self.rows, BINADE).to(torch.uint8).argmax(1)
            rows = ref.tie.view(self.rows, BINADE).any(1).nonzero().flatten()
            ref_stats["tie_sample"] += (self.x[rows * BINADE + first[rows]]).cpu().tolist()
        if ref.todo.any():
            r = resolve(self.x, ref, alpha, MAX_DECIMAL - ref_stats["resolved"])
            for key in ("resolved", "corrected", "unresolved"):
                ref_stats[key] += r[key]
        self.ref64, self.ref32 = ref.ref64, ref.ref32
        del ref
        self.r32b = bits32(self.ref32)
        self.ref_nan = torch.isnan(self.ref64)
        self.felu = F.elu(self.x, alpha)
        self.felub = bits32(self.felu)
        self.parts = bound_parts(self.x, self.ref64)
        self.finite, self.cls = self.parts["finite"], classify(self.x)
        self.den_out = self.parts["neg_branch"] & is_denormal(self.ref32)
        self.n_den_out = int(self.den_out.sum())


class Accumulator:
    """Everything recorded for one formula at one alpha, accumulated chunk by chunk (on the device)."""

    COUNTS = ("n_exceed_bound", "tolerance_checked", "tolerance_failed")  # the rest: sums over the classes

    def __init__(self, formula: Formula, device):
        self.formula = formula
        z = lambda *s, dt=torch.int64: torch.zeros(*s, dtype=dt, device=device)  # noqa: E731
        self.counts = z(len(self.COUNTS))
        self.classes, self.den_out = z(len(CLASSES) * COMBOS), z(COMBOS + 1)
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
        flags = (cr.to(torch.int32) | identical.to(torch.int32) << 1 | y_nan.to(torch.int32) << 2
                 | (yb == 0).to(torch.int32) << 3 | (yb == c.xb).to(torch.int32) << 4)
        self.classes += torch.bincount(c.cls * COMBOS + flags, minlength=len(CLASSES) * COMBOS)
        if c.n_den_out:
            self.den_out += torch.bincount(flags.masked_fill(~c.den_out, COMBOS), minlength=COMBOS + 1)
        del flags  # not held through the maxima: the chunk's peak memory

        # Per binade of the chunk the largest error; the running maxima (ulp error by sign, the task's bar), in one
        # transfer.
        self.binade["max_ulp"][g] = torch.maximum(self.binade["max_ulp"][g], err.view(c.rows, -1).amax(1))
        worst, ratio_max = torch.stack([err.max(), ratio.max()]).tolist()
        sign = "negative" if c.lo < 0 else "positive"
        self.max_ulp[sign] = max(worst, self.max_ulp[sign] or 0.0)
        if c.finite.any():
            self.max_ratio = max(ratio_max, self.max_ratio or 0.0)

    def to_dict(self, negative_groups: slice = slice(256, 512)) -> dict:
        counts = dict(zip(self.COUNTS, self.counts.tolist()))

        def flag_counts(row: list[int]) -> dict:
            return {"n": sum(row), **{name: sum(v for combo, v in enumerate(row) if combo >> bit & 1)
                                      for bit, name in enumerate(FLAGS)}}

        every = flag_counts(self.classes.view(len(CLASSES), COMBOS).sum(0).tolist())
        class_stats = {label: d for label, row in zip(CLASSES, self.classes.view(len(CLASSES), COMBOS).tolist())
                       if (d := flag_counts(row))["n"]}
        return {
            "n": every["n"],
            "max_ulp": {sign: None if v is None else {"ulp": v} for sign, v in self.max_ulp.items()},
            "correctly_rounded": every["correctly_rounded"], "bit_identical_to_felu": every["identical_to_felu"],
            "tolerance": {"n_checked": counts["tolerance_checked"], "n_fail": counts["tolerance_failed"],
                          "max_ratio": self.max_ratio},
            "bound": {"exponential": self.formula.exponential, "documented": self.formula.documented_bound,
                      "n_exceed": counts["n_exceed_bound"]},
            "classes": {**class_stats, DENORMAL_OUTPUT: flag_counts(self.den_out.tolist()[:COMBOS])},
            "binades_negative": {k: [short(v) for v in t[negative_groups].tolist()] for k, t in self.binade.items()},
        }


def short(v: float) -> float | int:
    if isinstance(v, int) or v == 0:
        return v
    return float(f"{v:.5g}")
