"""Figures: the steps against the datasheet floor and the measured roof; accuracy near zero."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

COLORS = {"step": "tab:blue", "baseline": "tab:gray", "sweep": "tab:cyan", "ablation": "tab:olive"}


def times_figure(record: dict, kinds=("step", "baseline")):
    """Horizontal bars of median time (10th-90th percentile whiskers), floor and roof as lines."""
    rows = [r for r in record["rows"] if r["kind"] in kinds]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.6))
    names = [r["name"] for r in rows][::-1]
    t = [r["timing"] for r in rows][::-1]
    med = [x["median_ms"] for x in t]
    err = [[max(0.0, m - x["p10_ms"]) for m, x in zip(med, t)], [max(0.0, x["p90_ms"] - m) for m, x in zip(med, t)]]
    ax.barh(names, med, xerr=err, color=[COLORS[r["kind"]] for r in rows][::-1], capsize=2)
    for m, name in zip(med, names):
        ax.text(m, name, f" {m:.2f}", va="center", fontsize=8)
    if record.get("roof_ms"):
        ax.axvline(record["roof_ms"], color="tab:green", ls="--", label=f"roof: copy_ {record['roof_ms']:.2f} ms")
    if record.get("floor_ms"):
        ax.axvline(record["floor_ms"], color="tab:red", ls=":", label=f"floor: datasheet {record['floor_ms']:.2f} ms")
    ax.set_xlabel("median time, ms (lower is better)")
    ax.set_title(f"ELU on {tuple(record['problem']['shape'])} float32, {record['provenance']['gpu']}")
    ax.set_xlim(0, max(med) * 1.15)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def near_zero_figure(record: dict, names):
    """Max relative error against float64 per decade of |x|: where exp(x) - 1 cancels."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for name in names:
        r = next(r for r in record["rows"] if r["name"] == name)
        decades = r["near_zero_rel_err"]
        ax.loglog([10 ** (float(k[2:]) + 0.5) for k in decades], list(decades.values()), marker="o", label=name)
    ax.set_xlabel("|x| (x < 0, one point per decade)")
    ax.set_ylabel("max relative error vs float64")
    ax.axhline(1e-4, color="gray", ls=":", label="rtol 1e-4")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
