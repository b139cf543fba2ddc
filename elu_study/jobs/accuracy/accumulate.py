"""The sweep's sums: a chunk of inputs with its reference (Chunk), and one formula at one alpha (Accumulator)."""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

from elu_study.jobs.accuracy.definitions import (BINADE, CLASSES, DENORMAL_OUTPUT, FLAGS, MAX_DECIMAL, N_BINS,
                                                 N_GROUPS, TOL, Formula)
from elu_study.jobs.accuracy.reference import (bits32, bound_parts, classify, f32_str, hex_bits, histogram_bins,
                                               is_denormal, patterns, predicted_ulp, reference, resolve, ulp_error)


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
            ref_stats["max_err_ulp64_resolved"] = max(ref_stats["max_err_ulp64_resolved"], r["max_err_ulp64"])
        self.ref64, self.ref32 = ref.ref64, ref.ref32
        del ref
        self.r32b = bits32(self.ref32)
        self.ref_nan = torch.isnan(self.ref64)
        self.ref_pzero, self.ref_nzero = self.r32b == 0, self.r32b == -(2**31)
        self.felu = F.elu(self.x, alpha)
        self.felub, self.felu_nan = bits32(self.felu), torch.isnan(self.felu)
        self.parts = bound_parts(self.x, self.ref64)
        self.finite, self.cls = self.parts["finite"], classify(self.x)
        self.present = [c for c, k in enumerate(torch.bincount(self.cls, minlength=len(CLASSES)).tolist()) if k]
        self.den_out = self.parts["neg_branch"] & is_denormal(self.ref32)
        self.n_den_out = int(self.den_out.sum())

    def location(self, i: int, y: torch.Tensor) -> dict:
        return {"x": f32_str(self.x[i].item()), "x_bits": hex_bits(self.xb[i].item()), "y": f32_str(y[i].item()),
                "y_bits": hex_bits(bits32(y)[i].item()), "reference": repr(self.ref64[i].item()),
                "reference_f32": f32_str(self.ref32[i].item())}


class Max:
    """Running maximum over chunks, where it first occurs, and how many inputs reach it."""

    def __init__(self):
        self.value, self.count, self.at = None, 0, None

    def update(self, value: float, count: int, at: Callable[[], dict]):
        if self.value is None or value > self.value:
            self.value, self.count, self.at = value, count, at()
        elif value == self.value:
            self.count += count

    def to_dict(self) -> dict | None:
        return None if self.value is None else {"ulp": self.value, "n_at_max": self.count, "at": self.at}


class Accumulator:
    """Everything recorded for one formula at one alpha, accumulated chunk by chunk (on the device)."""

    COUNTS = ("n", "correctly_rounded", "bit_identical_to_felu", "differ_from_felu_only_in_nan_bits",
              "nan_mismatch", "zero_sign_mismatch", "inf_error_on_finite_input", "n_exceed_bound",
              "n_exceed_bound_denormal", "tolerance_checked", "tolerance_failed")
    BINADE_MAX = ("max_ulp", "predicted_max_ulp", "max_tol_ratio")
    BINADE_COUNT = ("n_exceed_bound", "n_not_correctly_rounded", "n_differ_from_felu", "n_fail_tol")

    def __init__(self, formula: Formula, device):
        self.formula = formula
        z = lambda *s, dt=torch.int64: torch.zeros(*s, dtype=dt, device=device)  # noqa: E731
        self.counts, self.hist = z(len(self.COUNTS)), z(2 * N_BINS)
        self.classes, self.den_out = z(len(CLASSES) * 64), z(65)
        self.binade = {k: z(N_GROUPS, dt=torch.float64) for k in self.BINADE_MAX}
        self.binade.update({k: z(N_GROUPS) for k in self.BINADE_COUNT})
        self.class_max, self.den_out_max = [0.0] * len(CLASSES), 0.0
        self.max = {"negative": Max(), "positive": Max()}
        self.tol, self.excess = Max(), Max()

    def update(self, y: torch.Tensor, c: Chunk):
        """Add one chunk's outputs of this formula: counts, histogram, per-binade figures and maxima."""
        # Each output against the reference, the documented bound carried through ELU, and F.elu.
        y = y.contiguous()
        yb, err, y_nan, g = bits32(y), ulp_error(y, c.ref64), torch.isnan(y), c.groups
        nan_mismatch = y_nan ^ c.ref_nan  # NaN against a number, either way
        self.hist += torch.bincount(histogram_bins(err, nan_mismatch) + N_BINS * (c.xb < 0), minlength=2 * N_BINS)
        inf_err = torch.isinf(err) & c.finite
        err.masked_fill_(torch.isinf(err), 0.0)  # maxima are over finite errors; infinite ones are counted
        pred = predicted_ulp(c.x, c.ref64, c.alpha, self.formula, c.parts)
        self.binade["predicted_max_ulp"][g] = torch.maximum(self.binade["predicted_max_ulp"][g],
                                                            pred.view(c.rows, -1).amax(1))
        exceed = ((err > pred * (1 + 1e-12) + 1e-9) & c.finite) | inf_err
        excess = torch.where(c.finite, err - pred, -math.inf)
        del pred
        ratio = (y.double() - c.felu.double()).abs_().div_(c.felu.double().abs_().mul_(TOL).add_(TOL))
        ratio = torch.where(c.finite, ratio.masked_fill_(torch.isnan(ratio), math.inf), 0.0)  # over the task's bar
        fail = ~torch.isclose(y, c.felu, rtol=TOL, atol=TOL) & c.finite
        cr, identical = (yb == c.r32b) | (y_nan & c.ref_nan), yb == c.felub

        # The chunk's totals, and its inputs by class and by what came out (FLAGS, one bit each).
        pzero, nzero = yb == 0, yb == -(2**31)
        zero_sign = (pzero & c.ref_nzero) | (nzero & c.ref_pzero)
        self.counts += torch.stack([
            torch.tensor(c.n, device=y.device), cr.sum(), identical.sum(), (~identical & y_nan & c.felu_nan).sum(),
            nan_mismatch.sum(), zero_sign.sum(), inf_err.sum(), exceed.sum(),
            (exceed & c.parts["denormal_in_or_out"]).sum(), c.finite.sum(), fail.sum(),
        ])
        flags = (cr.to(torch.int32) | identical.to(torch.int32) << 1 | y_nan.to(torch.int32) << 2
                 | pzero.to(torch.int32) << 3 | nzero.to(torch.int32) << 4 | (yb == c.xb).to(torch.int32) << 5)
        self.classes += torch.bincount(c.cls * 64 + flags, minlength=len(CLASSES) * 64)
        if c.n_den_out:
            self.den_out += torch.bincount(flags.masked_fill(~c.den_out, 64), minlength=65)
        del pzero, nzero, zero_sign, flags  # not held through the maxima: the chunk's peak memory

        # Per binade of the chunk: the largest errors, and how many inputs miss each mark.
        for k, t in (("max_ulp", err), ("max_tol_ratio", ratio.masked_fill(torch.isinf(ratio), 0.0))):
            self.binade[k][g] = torch.maximum(self.binade[k][g], t.view(c.rows, -1).amax(1))
        for k, t in zip(self.BINADE_COUNT, (exceed, ~cr, ~identical, fail)):
            self.binade[k][g] += t.view(c.rows, -1).sum(1)

        # The running maxima (ulp error by sign, excess over the bound, tolerance ratio) and where they are. One
        # transfer: each maximum, where it first occurs and how often (err, excess, ratio), then exceed's count.
        vals = torch.stack([*first_max(err), *first_max(excess), *first_max(ratio), exceed.sum().double()]).tolist()
        self.max["negative" if c.lo < 0 else "positive"].update(vals[0], int(vals[2]),
                                                               lambda: c.location(int(vals[1]), y))
        if vals[9] > 0:
            self.excess.update(vals[3], int(vals[5]), lambda: c.location(int(vals[4]), y))
        if c.finite.any():
            self.tol.update(vals[6], int(vals[8]), lambda: c.location(int(vals[7]), y))
        per_class = [vals[0]] if len(c.present) == 1 else torch.stack(
            [torch.where(c.cls == k, err, -1.0).max() for k in c.present]).tolist()
        for k, v in zip(c.present, per_class):
            self.class_max[k] = max(self.class_max[k], v)
        if c.n_den_out:
            self.den_out_max = max(self.den_out_max, torch.where(c.den_out, err, -1.0).max().item())

    def to_dict(self, negative_groups: slice = slice(256, 512)) -> dict:
        counts = dict(zip(self.COUNTS, self.counts.tolist()))
        hist = self.hist.view(2, N_BINS).tolist()
        classes = self.classes.view(len(CLASSES), 64).tolist()

        def flag_counts(row64: list[int]) -> dict:
            return {"n": sum(row64), **{name: sum(v for combo, v in enumerate(row64) if combo >> bit & 1)
                                        for bit, name in enumerate(FLAGS)}}

        class_stats = {label: {**d, "max_ulp": self.class_max[k]} for k, label in enumerate(CLASSES)
                       if (d := flag_counts(classes[k]))["n"]}
        den = flag_counts(self.den_out.tolist()[:64])
        if den["n"]:
            den["max_ulp"] = self.den_out_max
        class_stats[DENORMAL_OUTPUT] = den
        binades = {k: [short(v) for v in t[negative_groups].tolist()] for k, t in self.binade.items()}
        return {
            "n": counts["n"],
            "max_ulp": {sign: m.to_dict() for sign, m in self.max.items()},
            "histogram": {"negative": hist[1], "positive": hist[0]},
            **{k: counts[k] for k in self.COUNTS[1:7]},  # the plain counts; the rest are under "tolerance" and "bound"
            "tolerance": {"n_checked": counts["tolerance_checked"], "n_fail": counts["tolerance_failed"],
                          "max_ratio": self.tol.value, "max_ratio_at": self.tol.at},
            "bound": {"exponential": self.formula.exponential, "documented": self.formula.documented_bound,
                      "n_exceed": counts["n_exceed_bound"],
                      "n_exceed_denormal_in_or_out": counts["n_exceed_bound_denormal"],
                      "max_excess_ulp": self.excess.value, "max_excess_at": self.excess.at},
            "classes": class_stats,
            "binades_negative": binades,
        }


def first_max(t: torch.Tensor) -> list[torch.Tensor]:
    m = t.max()
    return [m, t.argmax().double(), (t == m).sum().double()]


def short(v: float) -> float | int:
    if isinstance(v, int) or v == 0:
        return v
    return float(f"{v:.5g}")
