"""The model record read back (``core.record.load(gpu, "model")``, checked against its type in core/schema.py):
the frames and figures notebook 11 shows. Derived values (ratios, shares, verdicts) are computed here from the
measured ones, never stored."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from elu_study.core import text

GROUP = ["numel", "requires_grad", "autocast"]
CONFIG = ["model", "dtype", "mode", "compiled"]
TIE = 0.02  # within the larger of the run's noise and 2 %: not slower
MATTERS = 0.05  # where ELU is at least 5 % of the step, the drop-in should be faster (its median paired ratio under 1)
CI_Z = 1.96  # the median paired ratio's confidence interval: 95 %


def timer(record: dict) -> str:
    """How the record's whole steps were timed: "cuda_events" (each step, in pairs) or "wall_clock" (rounds)."""
    return "cuda_events" if all(r.get("timer") == "cuda_events" for r in record["end_to_end"]) else "wall_clock"


def checks(record: dict) -> pd.DataFrame:
    return pd.DataFrame([{"check": k, "passed": v["passed"]} for k, v in record["checks"].items()])


def accuracy(record: dict) -> pd.DataFrame:
    """Worst ulp over every negative float32, by alpha, for the drop-in's float32 default and F.elu."""
    return pd.DataFrame(record["checks"]["accuracy"]["worst_ulp_by_alpha"]).T.rename_axis("alpha")


def paired(a: list, b: list) -> pd.Series:
    """a[i] / b[i]: runs taken side by side (in one round, or one pair of steps), so the drift between them cancels."""
    return pd.Series(a) / pd.Series(b)


def median_ci(values: pd.Series, z: float = CI_Z) -> tuple[float, float]:
    """A distribution-free confidence interval of the median (95 % at z = 1.96): the order statistics at ranks
    n/2 -+ z sqrt(n)/2 (the binomial's normal approximation), as in Conover's Practical Nonparametric Statistics."""
    v = np.sort(np.asarray(values, dtype=float))
    half = z * np.sqrt(len(v)) / 2
    lo, hi = int(np.floor(len(v) / 2 - half)), int(np.ceil(len(v) / 2 + half)) - 1
    return float(v[max(lo, 0)]), float(v[min(hi, len(v) - 1)])


def host_ratios(record: dict) -> pd.DataFrame:
    """Each route's time over nn.ELU's in the same round: median and p10-p90 of the paired ratios, per group."""
    runs = pd.DataFrame(record["host_cost"]).pivot_table(index=GROUP, columns="route", values="us_runs",
                                                         aggfunc="first")
    return pd.DataFrame([{**dict(zip(GROUP, key)), "route": route, "ratio": q.median(), "p10": q.quantile(0.1),
                          "p90": q.quantile(0.9)} for key, r in runs.iterrows() for route in r.index
                         for q in [paired(r[route], r["nn.ELU"])]])


def host(record: dict) -> pd.DataFrame:
    """us per call, one row per group, one column per route; elu_study.ELU over nn.ELU as the median of the
    repeats' paired ratios (the routes alternate within each repeat)."""
    t = pd.DataFrame(record["host_cost"]).pivot_table(index=GROUP, columns="route", values="us_per_call")
    t["ELU / nn.ELU"] = host_ratios(record).set_index([*GROUP, "route"])["ratio"].xs("elu_study.ELU", level="route")
    return t.reset_index()


def end_to_end(record: dict) -> pd.DataFrame:
    """One row per configuration: both times (medians), the drop-in's ratio (the median of the paired steps'
    ratios) with its 95 % confidence interval (``median_ci``), the noise (half the p10-p90 spread of those ratios),
    ELU's share of the eager nn.ELU step, the saving that ELU's kernels alone give (their device time per step,
    nn.ELU's minus the drop-in's, over the nn.ELU step), whether the drop-in is faster (ratio under 1), faster
    beyond doubt (the interval under 1), and whether it is slower, or faster, beyond the tie (the larger of the
    noise and 2 %)."""
    wide = pd.DataFrame(record["end_to_end"]).pivot_table(index=CONFIG, columns="elu",
                                                          values=["ms", "elu_ms", "ms_runs"], aggfunc="first")
    ratios = [paired(d, n) for d, n in zip(wide[("ms_runs", "drop-in")], wide[("ms_runs", "nn.ELU")])]
    out = pd.DataFrame({"nn.ELU ms": wide[("ms", "nn.ELU")], "drop-in ms": wide[("ms", "drop-in")]})
    out["ratio"] = [r.median() for r in ratios]
    out["CI low"], out["CI high"] = zip(*(median_ci(r) for r in ratios))  # the ratio's 95 % interval
    out["noise"] = [(r.quantile(0.9) - r.quantile(0.1)) / 2 for r in ratios]
    # ELU's share from the eager nn.ELU step of the same model, dtype and mode: compiled, ELU sits inside fused
    # kernels whose whole time would count.
    share = (wide[("elu_ms", "nn.ELU")] / out["nn.ELU ms"]).xs(False, level="compiled")
    out = out.reset_index()
    out["ELU share"] = [share[(m, d, mode)] for m, d, mode in zip(out["model"], out["dtype"], out["mode"])]
    out["ELU saving"] = (wide[("elu_ms", "nn.ELU")] - wide[("elu_ms", "drop-in")]).to_numpy() / out["nn.ELU ms"]
    tie = out["noise"].clip(lower=TIE)
    out["slower"] = out["ratio"] - 1 > tie
    out["faster"] = out["ratio"] < 1
    out["faster beyond doubt"] = out["CI high"] < 1
    out["faster beyond tie"] = 1 - out["ratio"] > tie  # symmetric to slower
    return out


def bars(record: dict) -> dict[str, tuple[int, int]]:
    """The issue's bars, {key: (met, of)} (their words: templates/model/bars.md.j2): host cost, no slower
    step, faster where ELU matters (eager: compiled, the study's kernel does not run), checks."""
    out = {}
    if record.get("host_cost"):
        h = host(record)["ELU / nn.ELU"]
        out["host"] = (int((h <= 1).sum()), len(h))
    if record.get("end_to_end"):
        e = end_to_end(record)
        matters = e[~e["compiled"] & (e["ELU share"] >= MATTERS)]
        out["no_slower"] = (int((~e["slower"]).sum()), len(e))
        out["faster"] = (int(matters["faster"].sum()), len(matters))
        out["faster_beyond_doubt"] = (int(matters["faster beyond doubt"].sum()), len(matters))
    if record.get("checks"):
        c = checks(record)["passed"]
        out["checks"] = (int(c.sum()), len(c))
    return out


def predictions(record: dict) -> dict:
    """What notebook 11's predictions name, measured (their words and ranges: PREDICTIONS)."""
    acc, h, e = accuracy(record), host(record), end_to_end(record)
    r = host_ratios(record).set_index([*GROUP, "route"])["ratio"].unstack("route")
    no_grad = h[~h["requires_grad"]]
    eager, compiled = e[~e["compiled"]], e[e["compiled"]]
    matters = eager[eager["ELU share"] >= MATTERS]
    bf16 = matters[matters["dtype"] != "float32"]
    f32 = eager[eager["dtype"] == "float32"]
    return {"ulp_default": acc.loc["1", "elu_study.ELU"], "ulp_f_elu": acc.loc["1", "F.elu"],
            "checks_failed": int((~checks(record)["passed"]).sum()), "host": h["ELU / nn.ELU"].tolist(),
            "binding_not_cheapest": int((no_grad[["nn.ELU", "F.elu", "binding", "torch.ops", "elu_study.ELU"]]
                                         .idxmin(axis=1) != "binding").sum()),
            "ops": (r["torch.ops"] / r["elu_study.ELU"]).tolist(),  # both over nn.ELU in the same round
            "bf16_not_faster": int((~bf16["faster beyond tie"]).sum()),
            "f32_slower": int(f32["slower"].sum()),
            "f32": f32["ratio"].tolist(), "compiled": compiled["ratio"].tolist(),
            "small": eager[eager["model"].str.startswith("MLP 4x256")]["ratio"].tolist(),
            # round 2, the paired steps (notebook 11's second block of predictions)
            "resnet_noise": eager[eager["model"].str.contains("ResNet")]["noise"].tolist(),
            "explained": (matters["ratio"] - (1 - matters["ELU saving"])).tolist(),
            "beyond_doubt": int(matters["faster beyond doubt"].sum()),
            # round 3, runs of several steps (notebook 11's third block of predictions)
            "matters": len(matters),
            "resnet_train": eager[eager["model"].str.contains("ResNet") & (eager["mode"] == "train")]["ratio"].tolist(),
            "small_device_share": device_share(record, "MLP 4x256") + device_share(record, "MLP 4x2048"),
            # round 4, ResNet-18 at the batch it trains at (notebook 11's fourth block of predictions)
            "resnet_device_share": device_share(record, "timm ResNet-18"),
            **{f"resnet_train_{d}": eager[eager["model"].str.contains("ResNet") & (eager["mode"] == "train")
                                          & (eager["dtype"] == d)]["ratio"].tolist() for d in eager["dtype"].unique()},
            "faster": int(matters["faster"].sum())}


def cnn_batch(record: dict) -> int | None:
    """The batch the record's ResNet-18 steps ran at, read from the model's name (None: no ResNet row)."""
    names = {r["model"] for r in record["end_to_end"] if "ResNet" in r["model"]}
    found = {int(m.group(1)) for n in names if (m := re.search(r"batch (\d+)", n))}
    return found.pop() if len(found) == 1 else None


def device_share(record: dict, model: str) -> list[float]:
    """The device's share of each eager step of ``model`` (a name's prefix), both nets: the device time of one
    profiled step (``device_ms``) over the step's time. Well under 1: the host paces the step."""
    return [r["device_ms"] / r["ms"] for r in record["end_to_end"]
            if r["model"].startswith(model) and not r["compiled"] and "device_ms" in r]


# Notebook 11's predictions, each written before a run, as (number, what, value, lo, hi): value and a str bound
# name a key of predictions(), a list reduced by the function after the colon. 17 to 23 (ResNet-18 at batch 256)
# are the notebook's prediction, graded there; the earlier ones are kept as written.
PREDICTIONS = (
    (1, "float32 default, worst ulp at alpha = 1", "ulp_default", 1, 2),
    (1, "F.elu, worst ulp at alpha = 1", "ulp_f_elu", 0.5, 1.5), (1, "checks failed", "checks_failed", 0, 0),
    (2, "ELU / nn.ELU host time, lowest group", "host:min", 0.75, 1),
    (2, "ELU / nn.ELU host time, highest group", "host:max", 0.75, 1),
    (3, "no-grad groups where the binding is not the cheapest", "binding_not_cheapest", 0, 0),
    (4, "torch.ops / ELU host time, lowest group", "ops:min", 1.2, 2.5),
    (4, "torch.ops / ELU host time, highest group", "ops:max", 1.2, 2.5),
    (5, "eager bf16 steps with ELU >= 5 % where the drop-in is not faster beyond the tie", "bf16_not_faster", 0, 0),
    (6, "eager float32 steps slower beyond the tie", "f32_slower", 0, 0),
    (6, "eager float32 drop-in / nn.ELU, lowest", "f32:min", 0.97, 1.01),
    (6, "eager float32 drop-in / nn.ELU, highest", "f32:max", 0.97, 1.01),
    (7, "compiled drop-in / nn.ELU, lowest", "compiled:min", 0.98, 1.02),
    (7, "compiled drop-in / nn.ELU, highest", "compiled:max", 0.98, 1.02),
    (8, "small MLP eager drop-in / nn.ELU, highest", "small:max", 0.9, 1),
    (9, "eager ResNet-18 noise (half the p10-p90 of paired ratios), highest", "resnet_noise:max", 0, 0.03),
    (10, "compiled drop-in / nn.ELU, lowest", "compiled:min", 0.99, 1.01),
    (10, "compiled drop-in / nn.ELU, highest", "compiled:max", 0.99, 1.01),
    (11, "ratio - (1 - ELU saving) where ELU >= 5 %, lowest", "explained:min", -0.005, 0.005),
    (11, "ratio - (1 - ELU saving) where ELU >= 5 %, highest", "explained:max", -0.005, 0.005),
    (12, "steps with ELU >= 5 % faster beyond doubt", "beyond_doubt", 3, "matters"),
    (13, "ELU / nn.ELU host time, lowest group", "host:min", 0.8, 0.95),
    (13, "ELU / nn.ELU host time, highest group", "host:max", 0.8, 0.95),
    (14, "eager ResNet-18 training drop-in / nn.ELU, lowest", "resnet_train:min", 0.97, 1.01),
    (14, "eager ResNet-18 training drop-in / nn.ELU, highest", "resnet_train:max", 0.97, 1.01),
    (15, "eager MLP 4x256 and 4x2048 steps, device time / step time, highest", "small_device_share:max", 0, 0.5),
    (16, "steps with ELU >= 5 % faster beyond doubt", "beyond_doubt", "matters", "matters"),
    (17, "eager ResNet-18 steps, device time / step time, lowest", "resnet_device_share:min", 0.85, 1.1),
    (18, "eager ResNet-18 float32 training drop-in / nn.ELU", "resnet_train_float32:min", 0.99, 0.999),
    (19, "eager ResNet-18 bfloat16 training drop-in / nn.ELU", "resnet_train_bfloat16 autocast:min", 0.975, 0.995),
    (20, "eager ResNet-18 noise (half the p10-p90 of paired ratios), highest", "resnet_noise:max", 0, 0.02),
    (21, "eager steps with ELU >= 5 %", "matters", 4, 4),
    (22, "of them, faster (median paired ratio under 1)", "faster", "matters", "matters"),
    (23, "of them, faster beyond doubt", "beyond_doubt", "matters", "matters"),
)
PREDICTION = tuple(p for p in PREDICTIONS if p[0] >= 17)


def grades(record: dict, rows=PREDICTION) -> list[dict]:
    """Each prediction's measured value (None where the record lacks it) and verdict: HELD inside its range."""
    m, out = predictions(record), []

    def value(key):
        if not isinstance(key, str):
            return key
        key, _, how = key.partition(":")
        v = m.get(key)
        return ({"min": min, "max": max}[how](v) if v else None) if how else v

    for n, what, key, lo, hi in rows:
        v, lo, hi = value(key), value(lo), value(hi)
        out.append({"n": n, "what": what, "value": v, "lo": lo, "hi": hi, "verdict": "NOT MEASURED" if v is None
                    else "HELD" if lo <= v <= hi else "MISSED (lower)" if v < lo else "MISSED (higher)"})
    return out


def graded(record: dict) -> text.Text:
    """Notebook 11's prediction graded on the record (if it ran ResNet-18 at the batch predicted), then the bars."""
    return text.show("model/graded.md.j2", rows=grades(record), batch=cnn_batch(record), bars=bars(record))


ROUTE_STYLE = {"nn.ELU": ("tab:gray", "o"), "F.elu": ("tab:brown", "s"), "binding": ("tab:green", "^"),
               "torch.ops": ("tab:red", "v"), "elu_study.ELU": ("tab:blue", "D")}


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
    """Drop-in time over nn.ELU's per configuration (the median of the paired runs; whiskers half their
    p10-p90), eager and compiled side by side; the shaded band is the tie's floor, the colour ELU's share of
    the eager nn.ELU step."""
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
        ax.set_yticks(list(y))
        ax.set_yticklabels([f"{r.model.split(',')[0].removeprefix('timm ').removesuffix(' with ELU')} | {r.dtype} | "
                            f"{r.mode}" for r in panel.itertuples()], fontsize=8)
        ax.set_title("compiled: both run F.elu" if compiled else "eager")
        ax.set_xlabel("drop-in / nn.ELU step time")
        ax.grid(axis="x", alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Whole steps against nn.ELU, {record['provenance']['gpu']}")
    fig.tight_layout(rect=(0, 0, 0.93, 1))
    fig.colorbar(plt.cm.ScalarMappable(cmap="viridis", norm=plt.Normalize(0, top)), ax=axes,
                 label="ELU share, eager nn.ELU step", fraction=0.02, pad=0.01)
    return fig
