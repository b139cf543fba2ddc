"""The frames and figures notebook 11 shows from the model record: ratios, shares and verdicts computed from the
measured values, never stored."""

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from elu_study.core import fingerprint, text
from elu_study.core.tables import as_built

GROUP = ["numel", "requires_grad", "autocast"]
CONFIG = ["model", "dtype", "mode", "compiled"]
TIE = 0.02  # the figure's band: within the larger of the run's noise and 2 %, a tie
MATTERS = 0.05  # where ELU is at least 5 % of the step, the drop-in should be faster (its median paired ratio under 1)
CI_Z = 1.96  # the median paired ratio's confidence interval: 95 %


def checks(record: dict) -> pd.DataFrame:
    """Each check's result and what it measured, one row per item (nested tables, as accuracy's, apart)."""
    return pd.DataFrame([{"check": name, "item": item, "value": v} for name, c in record["checks"].items()
                         for item, v in c.items() if not isinstance(v, dict)])


def accuracy(record: dict) -> pd.DataFrame:
    """Worst ulp over every negative float32, by alpha, for the drop-in's float32 default and F.elu."""
    return pd.DataFrame(record["checks"]["accuracy"]["worst_ulp_by_alpha"]).T.rename_axis("alpha")


def median_ci(values: pd.Series, z: float = CI_Z) -> tuple[float, float]:
    """A distribution-free confidence interval of the median (95 % at z = 1.96): the order statistics at ranks
    n/2 -+ z sqrt(n)/2 (the binomial's normal approximation), as in Conover's Practical Nonparametric Statistics."""
    v = np.sort(np.asarray(values, dtype=float))
    half = z * np.sqrt(len(v)) / 2
    lo, hi = int(np.floor(len(v) / 2 - half)), int(np.ceil(len(v) / 2 + half)) - 1
    return float(v[max(lo, 0)]), float(v[min(hi, len(v) - 1)])


def host_ratios(record: dict) -> pd.DataFrame:
    """Per group, each route's time over nn.ELU's in the same round (paired: drift cancels), median and p10-p90."""
    runs = pd.DataFrame(record["host_cost"]).pivot_table(index=GROUP, columns="route", values="us_runs",
                                                         aggfunc="first")
    return pd.DataFrame([{**dict(zip(GROUP, key)), "route": route, "ratio": q.median(), "p10": q.quantile(0.1),
                          "p90": q.quantile(0.9)} for key, r in runs.iterrows() for route in r.index
                         for q in [pd.Series(r[route]) / pd.Series(r["nn.ELU"])]])


def end_to_end(record: dict) -> pd.DataFrame:
    """One row per configuration: median times, the paired ratios' median, 95 % interval and noise (half their
    p10-p90), ELU's share of the eager nn.ELU step, and the saving of ELU's kernels alone (their device time, nn.ELU's
    minus the drop-in's, over the nn.ELU step)."""
    wide = pd.DataFrame(record["end_to_end"]).pivot_table(index=CONFIG, columns="elu", aggfunc="first",
                                                          values=["ms", "elu_ms", "ms_runs"])
    ratios = [pd.Series(d) / pd.Series(n) for d, n in zip(wide[("ms_runs", "drop-in")], wide[("ms_runs", "nn.ELU")])]
    out = pd.DataFrame({"nn.ELU ms": wide[("ms", "nn.ELU")], "drop-in ms": wide[("ms", "drop-in")]})
    out["ratio"] = [r.median() for r in ratios]
    out["CI low"], out["CI high"] = zip(*(median_ci(r) for r in ratios))  # the ratio's 95 % interval
    out["noise"] = [(r.quantile(0.9) - r.quantile(0.1)) / 2 for r in ratios]
    # ELU's share from the eager nn.ELU step of the same model, dtype and mode: compiled, ELU sits inside fused
    # kernels whose whole time would count.
    share = (wide[("elu_ms", "nn.ELU")] / out["nn.ELU ms"]).xs(False, level="compiled").rename("ELU share")
    out = out.reset_index().join(share, on=["model", "dtype", "mode"])
    out["ELU saving"] = (wide[("elu_ms", "nn.ELU")] - wide[("elu_ms", "drop-in")]).to_numpy() / out["nn.ELU ms"]
    # beyond doubt: the interval excludes 1 and the ratio lies below the tie band (the compiled A/A rows' intervals
    # exclude 1 too, so an interval alone does not tell a gain from the timer's own drift)
    tie = np.maximum(out["noise"], TIE)
    return out.assign(**{"faster": out["ratio"] < 1, "faster beyond doubt": (out["CI high"] < 1) & (out["ratio"] < 1 - tie)})


def measured(record: dict) -> dict:
    """What notebook 11's prediction names, measured (its words and ranges: PREDICTION)."""
    e = end_to_end(record)
    eager = e[~e["compiled"]]
    resnet = eager[eager["model"].str.contains("ResNet")]
    train = resnet[resnet["mode"] == "train"].set_index("dtype")["ratio"]
    matters = eager[eager["ELU share"] >= MATTERS]
    shares = [r["device_ms"] / r["ms"] for r in record["end_to_end"]  # both nets' steps
              if "ResNet" in r["model"] and not r["compiled"]]
    return {"resnet_device_share": min(shares, default=None), "resnet_noise": resnet["noise"].max(),
            "resnet_train_float32": train.get("float32"), "resnet_train_bfloat16": train.get("bfloat16 autocast"),
            "matters": len(matters), "faster": int(matters["faster"].sum()),
            "beyond_doubt": int(matters["faster beyond doubt"].sum())}


def cnn_batch(record: dict) -> int | None:
    """The batch the record's ResNet-18 steps ran at, read from the model's name (None: no ResNet row)."""
    found = {int(m.group(1)) for r in record["end_to_end"] if (m := re.search(r"ResNet.*batch (\d+)", r["model"]))}
    return found.pop() if len(found) == 1 else None


# Notebook 11's prediction, written before the run of ResNet-18 at batch 256, as (what, value, lo, hi): value and a
# str bound name a key of measured().
PREDICTION = (  # (words, measured, low, high, the dtype whose default builds it grades: None, every dtype's)
    ("eager ResNet-18 steps, device time / step time, lowest", "resnet_device_share", 0.85, 1.1, None),
    ("eager ResNet-18 float32 training drop-in / nn.ELU", "resnet_train_float32", 0.99, 0.999, "float32"),
    ("eager ResNet-18 bfloat16 training drop-in / nn.ELU", "resnet_train_bfloat16", 0.975, 0.995, "bfloat16"),
    ("eager ResNet-18 noise (half the p10-p90 of paired ratios), highest", "resnet_noise", 0, 0.02, None),
    ("eager steps with ELU >= 5 %", "matters", 4, 4, None),
    ("of them, faster (median paired ratio under 1)", "faster", "matters", "matters", None),
    ("of them, faster beyond doubt", "beyond_doubt", "matters", "matters", None),
)


def grades(record: dict) -> list[dict]:
    """Each prediction's measured value (None where the record lacks it) and verdict: HELD inside its range, with
    "(earlier build)" where a default build of the dtype it grades changed since the record."""
    m, out, earlier = measured(record), [], fingerprint.earlier_variants(record)
    for what, *bounds, dtype in PREDICTION:
        v, lo, hi = (m.get(b) if isinstance(b, str) else b for b in bounds)
        builds = {d["build"] for d in record["defaults"] if dtype in (None, d["dtype"])}
        out.append({"what": what, "value": v, "lo": lo, "hi": hi, "verdict": "NOT MEASURED" if v is None
                    else as_built("HELD" if lo <= v <= hi else "MISSED (lower)" if v < lo else "MISSED (higher)",
                                  earlier, *builds)})
    return out


def graded(record: dict) -> text.Text:
    """Notebook 11's prediction graded on the record (if it ran ResNet-18 at the batch predicted)."""
    return text.show("model/graded.md.j2", rows=grades(record), batch=cnn_batch(record))


ROUTE_STYLE = {"nn.ELU": ("tab:gray", "o"), "F.elu": ("tab:brown", "s"), "binding": ("tab:green", "^"),
               "elu_study.ELU": ("tab:blue", "D")}


def host_figure(record: dict):
    """Each route's host time over nn.ELU's in the same round (the median of the paired rounds; whiskers their
    p10-p90), against tensor size, one panel per (requires_grad, autocast). Below 1: cheaper than nn.ELU."""
    s = host_ratios(record)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2), sharey=True)
    for ax, ((grad, autocast), panel) in zip(axes, s.groupby(["requires_grad", "autocast"])):
        for route, (color, marker) in ROUTE_STYLE.items():
            r = panel[panel["route"] == route].sort_values("numel")
            ax.errorbar(r["numel"], r["ratio"], yerr=[r["ratio"] - r["p10"], r["p90"] - r["ratio"]], color=color,
                        marker=marker, capsize=3, label=route)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set(xticks=sorted(panel["numel"].unique()), xlabel="elements per call")
        ax.set_title(f"requires_grad={grad}, {'bfloat16 autocast' if autocast else 'float32'}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("host time / nn.ELU's, p10-p90")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Host time per call, {record['provenance']['gpu']}")
    fig.tight_layout()
    return fig


def end_to_end_figure(record: dict):
    """Drop-in time over nn.ELU's per configuration (the paired runs' median; whiskers half their p10-p90), eager and
    compiled side by side; the shaded band is the tie's floor, the colour ELU's share of the eager nn.ELU step."""
    e = end_to_end(record)
    fig, axes = plt.subplots(1, 2, figsize=(17, 0.22 * len(e) + 2.5), sharey=True, sharex=True)
    top = max(0.1, float(e["ELU share"].max()))
    for ax, (compiled, panel) in zip(axes, e.groupby("compiled")):
        panel = panel.reset_index(drop=True)
        y = range(len(panel))
        ax.barh(y, panel["ratio"] - 1, left=1, color=plt.cm.viridis(panel["ELU share"].clip(0, top) / top), height=0.7)
        ax.errorbar(panel["ratio"], y, xerr=panel["noise"], fmt="none", ecolor="black", capsize=2, lw=0.8)
        ax.axvline(1, color="black", lw=0.8)
        ax.axvspan(1 - TIE, 1 + TIE, color="gray", alpha=0.15, label="+-2 % (the tie's floor)")
        ax.set_yticks(list(y), [f"{r.model.split(',')[0].removeprefix('timm ').removesuffix(' with ELU')} | {r.dtype} | "
                                f"{r.mode}" for r in panel.itertuples()], fontsize=8)
        ax.set(title="compiled: both run F.elu" if compiled else "eager", xlabel="drop-in / nn.ELU step time")
        ax.grid(axis="x", alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Whole steps against nn.ELU, {record['provenance']['gpu']}")
    fig.tight_layout(rect=(0, 0, 0.93, 1))
    fig.colorbar(plt.cm.ScalarMappable(cmap="viridis", norm=plt.Normalize(0, top)), ax=axes,
                 label="ELU share, eager nn.ELU step", fraction=0.02, pad=0.01)
    return fig
