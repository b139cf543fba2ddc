"""Notebook 07's figures, one panel per alpha: the worst error per binade of |x|, and the ulp-error histograms."""

import math

import matplotlib.pyplot as plt


# Drawn in this order, with these styles; formulas that agree bit for bit draw on top of each other.
STYLES = {"1_naive": {"color": "tab:red", "marker": "o", "ms": 5, "mfc": "none"},
          "4_fast_math": {"color": "tab:orange", "marker": "s", "ms": 3},
          "5_streaming": {"color": "tab:blue", "marker": "^", "ms": 4},
          "F.elu": {"color": "black", "marker": "x", "ms": 4},
          "torch.compile(F.elu)": {"color": "tab:green", "marker": "+", "ms": 6},
          "6_beyond_copy": {"color": "tab:purple", "marker": "D", "ms": 3}}
ZERO_FLOOR = 2.0**-4  # where a binade with no error at all is drawn on a log axis


def binade_figure(record: dict):
    """Max ulp error per binade of |x| (x < 0, denormals leftmost); dashed: the documented bound carried through."""
    fig, axes = plt.subplots(1, len(record["runs"]), figsize=(6.2 * len(record["runs"]), 5.0), sharey=True,
                             squeeze=False)
    xs = [math.ldexp(1.0, -149 if e == 0 else e - 127) for e in range(255)]  # 255: inf and NaN, left out
    top, flushes = 1.0, {f["name"]: f["flushes_denormals"] for f in record["formulas"]}
    # Right end: two binades past the last one where any formula has any error.
    last = max((e for run in record["runs"].values() for s in run["formulas"].values()
                for e, v in enumerate(s["binades_negative"]["max_ulp"][:255]) if v > 0), default=127)
    for ax, alpha in zip(axes[0], record["runs"]):
        drawn = set()
        for name, s in record["runs"][alpha]["formulas"].items():
            bn, style = s["binades_negative"], STYLES.get(name, {})
            ys = [max(v, ZERO_FLOOR) for v in bn["max_ulp"][:255]]
            top = max(top, *ys)
            ax.plot(xs[1:], ys[1:], lw=1, label=name, **style)
            ax.plot(xs[:1], ys[:1], ls="none", **style)  # the denormals: not joined to the normal binades
            if (key := (s["bound"]["exponential"], flushes.get(name, False))) not in drawn:
                drawn.add(key)
                ax.plot(xs, [max(v, ZERO_FLOOR) for v in bn["predicted_max_ulp"][:255]], ls="--", lw=0.8, alpha=0.7,
                        color=style.get("color", "gray"), label=f"carried bound of {s['bound']['documented']}")
        ax.axhline(0.5, color="gray", ls=":", lw=0.8, label="1/2 ulp: correctly rounded")
        ticks = [k for k in (-149, -126, -100, -75, -50, -25, 0, 25, 50, 75, 100, 127) if k <= last - 125]
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks([2.0**k for k in ticks], [f"$2^{{{k}}}$" for k in ticks])
        ax.set(xlim=(2.0**-151, 2.0 ** (last - 125)), xlabel="|x|, its binade's lower edge", title=f"alpha = {alpha}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set(ylabel=f"max ulp (0 at 2^{int(math.log2(ZERO_FLOOR))})", ylim=(ZERO_FLOOR / 2, top * 16))
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig
