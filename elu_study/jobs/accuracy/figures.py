"""The accuracy record's figures: the worst error per binade of |x|, and the ulp-error histograms
(shown in notebooks/07_accuracy.ipynb; no figure of this job is saved under results/)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from elu_study.jobs.accuracy.analysis import alphas, histogram_table

# Drawn in this order, with these styles; formulas that agree bit for bit draw on top of each other.
STYLES = {
    "1_naive": dict(color="tab:red", marker="o", ms=5, mfc="none"),
    "4_fast_math": dict(color="tab:orange", marker="s", ms=3),
    "5_streaming": dict(color="tab:blue", marker="^", ms=4),
    "F.elu": dict(color="black", marker="x", ms=4),
    "torch.compile(F.elu)": dict(color="tab:green", marker="+", ms=6),
}
ZERO_FLOOR = 2.0**-4  # where a binade with no error at all is drawn on a log axis


def _binade_x(e: int) -> float:
    return math.ldexp(1.0, -149) if e == 0 else math.ldexp(1.0, e - 127)


def binade_figure(record: dict):
    """Max ulp error per binade of |x| (x < 0), one panel per alpha; dashed: the documented bound carried through."""
    keys = alphas(record)
    fig, axes = plt.subplots(1, len(keys), figsize=(6.2 * len(keys), 5.0), sharey=True, squeeze=False)
    measured_max = 1.0
    # Right end: two binades past the last one where any formula has any error.
    last = max((e for run in record["runs"].values() for s in run["formulas"].values()
                for e, v in enumerate(s["binades_negative"]["max_ulp"][:255]) if v > 0), default=127)
    for ax, alpha in zip(axes[0], keys):
        formulas = record["runs"][alpha]["formulas"]
        drawn_bounds = set()
        for name, s in formulas.items():
            bn = s["binades_negative"]
            es = list(range(255))  # 255: inf and NaN
            xs = [_binade_x(e) for e in es]
            ys = [max(bn["max_ulp"][e], ZERO_FLOOR) for e in es]
            measured_max = max(measured_max, *ys)
            style = STYLES.get(name, {})
            ax.plot(xs[1:], ys[1:], lw=1, label=name, **style)
            ax.plot(xs[:1], ys[:1], ls="none", **style)  # the denormals: not joined to the normal binades
            key = (s["bound"]["exponential"], any(f["flushes_denormals"] for f in record["formulas"] if f["name"] == name))
            if key not in drawn_bounds:
                drawn_bounds.add(key)
                pred = [max(bn["predicted_max_ulp"][e], ZERO_FLOOR) for e in es]
                ax.plot(xs, pred, ls="--", lw=0.8, color=style.get("color", "gray"), alpha=0.7,
                        label=f"carried bound of {s['bound']['documented']}")  # a label may not start with "_"
        ax.axhline(0.5, color="gray", ls=":", lw=0.8, label="1/2 ulp: correctly rounded")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ticks = [k for k in (-149, -126, -100, -75, -50, -25, 0, 25, 50, 75, 100, 127) if k <= last - 125]
        ax.set_xticks([2.0**k for k in ticks], [f"$2^{{{k}}}$" for k in ticks])
        ax.set_xlim(2.0**-151, 2.0 ** (last - 125))
        ax.set_xlabel("|x| (x < 0), lower edge of its binade; leftmost point: the denormals")
        ax.set_title(f"alpha = {alpha}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel(f"max ulp error in the binade (0 drawn at 2^{int(math.log2(ZERO_FLOOR))})")
    axes[0][0].set_ylim(ZERO_FLOOR / 2, measured_max * 16)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def histogram_figure(record: dict, sign: str = "negative"):
    """Inputs per ulp-error bin, one panel per alpha, one bar per formula (log scale)."""
    keys = alphas(record)
    fig, axes = plt.subplots(1, len(keys), figsize=(6.2 * len(keys), 4.4), sharey=True, squeeze=False)
    for ax, alpha in zip(axes[0], keys):
        df = histogram_table(record, alpha, sign)
        width = 0.8 / max(1, len(df.columns))
        for i, name in enumerate(df.columns):
            pos = [j + (i - (len(df.columns) - 1) / 2) * width for j in range(len(df))]
            ax.bar(pos, [max(v, 0.5) if v else 0 for v in df[name]], width, label=name,
                   color=STYLES.get(name, {}).get("color"))
        ax.set_xticks(range(len(df)))
        ax.set_xticklabels(df.index, rotation=60, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("ulp error")
        ax.set_title(f"alpha = {alpha}, inputs with the sign bit set")
    axes[0][0].set_ylabel("inputs")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig
