"""The model record's figures: the host's cost per call by route, and whole steps, drop-in over nn.ELU."""

from __future__ import annotations

import matplotlib.pyplot as plt

from elu_study.jobs.model import analysis

ROUTE_STYLE = {"nn.ELU": ("tab:gray", "o"), "F.elu": ("tab:brown", "s"), "binding": ("tab:green", "^"),
               "torch.ops": ("tab:red", "v"), "elu_study.ELU": ("tab:blue", "D")}


def host_figure(record: dict):
    """Each route's host time over nn.ELU's in the same round, against tensor size, one panel per
    (requires_grad, autocast); whiskers p10-p90 of the paired rounds. Below 1: cheaper than nn.ELU."""
    s = analysis.host_ratios(record)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2), sharey=True)
    for ax, ((grad, autocast), panel) in zip(axes, s.groupby(["requires_grad", "autocast"])):
        for route, (color, marker) in ROUTE_STYLE.items():
            r = panel[panel["route"] == route].sort_values("numel")
            ax.errorbar(r["numel"], r["ratio"], yerr=[r["ratio"] - r["p10"], r["p90"] - r["ratio"]], color=color,
                        marker=marker, capsize=3, label=route)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(panel["numel"].unique()))
        ax.set_title(f"requires_grad={grad}, " + ("bfloat16 autocast" if autocast else "float32"), fontsize=10)
        ax.set_xlabel("elements per call")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("host time per call / nn.ELU's, same round\n(median of 15; whiskers p10-p90)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{record['provenance']['gpu']}: what one ELU call costs the host, route by route, against nn.ELU")
    fig.tight_layout()
    return fig


def end_to_end_figure(record: dict):
    """Drop-in time over nn.ELU's per configuration, eager and compiled side by side; the shaded band is the
    tie (the larger of the run's noise and 2 %), the colour ELU's share of the step."""
    e = analysis.end_to_end(record)
    fig, axes = plt.subplots(1, 2, figsize=(17, 0.22 * len(e) + 2.5), sharey=True, sharex=True)
    top = max(0.1, float(e["ELU share"].max()))
    for ax, (compiled, panel) in zip(axes, e.groupby("compiled")):
        panel = panel.reset_index(drop=True)
        y = range(len(panel))
        colors = plt.cm.viridis(panel["ELU share"].clip(0, top) / top)
        ax.barh(y, panel["ratio"] - 1, left=1, color=colors, height=0.7)
        ax.errorbar(panel["ratio"], y, xerr=panel["noise"], fmt="none", ecolor="black", capsize=2, lw=0.8)
        ax.axvline(1, color="black", lw=0.8)
        ax.axvspan(1 - analysis.TIE, 1 + analysis.TIE, color="gray", alpha=0.15, label="+-2 % (the tie's floor)")
        ax.set_yticks(list(y))
        ax.set_yticklabels([f"{r.model.split(',')[0].removeprefix('timm ').removesuffix(' with ELU')} | {r.dtype} | "
                            f"{r.mode}" for r in panel.itertuples()], fontsize=8)
        ax.set_title("torch.compile: both run F.elu (the same program twice)" if compiled else "eager")
        ax.set_xlabel("drop-in step time / nn.ELU's (median of paired rounds; whiskers: half their p10-p90)")
        ax.grid(axis="x", alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    sm = plt.cm.ScalarMappable(cmap="viridis", norm=plt.Normalize(0, top))
    fig.suptitle(f"{record['provenance']['gpu']}: whole steps with the drop-in, against nn.ELU")
    fig.tight_layout(rect=(0, 0, 0.93, 1))
    fig.colorbar(sm, ax=axes, label="ELU's share of the eager nn.ELU step", fraction=0.02, pad=0.01)
    return fig
