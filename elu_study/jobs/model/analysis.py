"""The model record read back: its declared tables, checked on load, and the frames the notebook shows.

Derived values (ratios, shares, verdicts) are computed here from the measured ones, never stored.
"""

from __future__ import annotations

import pandas as pd

from elu_study.core.record import REFERENCE_GPU, RecordError, load, record_path

# The record's tables: field -> type (units in the name: _us, _ms). A record missing one, or holding another
# type, is refused on load with the file and the field named.
TABLES = {
    "host_cost": {"route": str, "numel": int, "requires_grad": bool, "autocast": bool, "us_per_call": float,
                  "us_runs": list},
    "end_to_end": {"model": str, "dtype": str, "mode": str, "compiled": bool, "elu": str, "ms": float,
                   "noise_ms": float, "ms_runs": list, "steps_per_run": int, "elu_ms": float},
    "host_profile": {"route": str, "requires_grad": bool, "name": str, "count_per_call": float,
                     "self_us_per_call": float},
    "defaults": {"dtype": str, "direction": str, "build": str, "flags": str, "measured as": str},
}
GROUP = ["numel", "requires_grad", "autocast"]
CONFIG = ["model", "dtype", "mode", "compiled"]
TIE = 0.02  # within the larger of the run's noise and 2 %: not slower
MATTERS = 0.05  # where ELU is at least 5 % of the step, the drop-in should be faster


def check_tables(record: dict, path) -> dict:
    for table, fields in TABLES.items():
        for i, row in enumerate(record.get(table, [])):
            for field, kind in fields.items():
                value = row.get(field)
                ok = isinstance(value, kind) or kind is float and isinstance(value, int) and not isinstance(value, bool)
                if not ok:
                    raise RecordError(f"{path}: {table}[{i}].{field} should be {kind.__name__}, got {value!r}")
    return record


def read_record(gpu: str = REFERENCE_GPU, required: bool = True) -> dict | None:
    record = load(gpu, "model", required=required)
    return None if record is None else check_tables(record, record_path(gpu, "model"))


def defaults(record: dict) -> pd.DataFrame:
    return pd.DataFrame(record["defaults"])


def checks(record: dict) -> pd.DataFrame:
    return pd.DataFrame([{"check": k, "passed": v["passed"]} for k, v in record["checks"].items()])


def paired(a: list, b: list) -> pd.Series:
    """a[i] / b[i]: runs taken side by side in one round, so the host's drift between rounds cancels."""
    return pd.Series(a) / pd.Series(b)


def host(record: dict) -> pd.DataFrame:
    """us per call, one row per group, one column per route; elu_study.ELU over nn.ELU as the median of the
    repeats' paired ratios (the routes alternate within each repeat)."""
    rows = pd.DataFrame(record["host_cost"])
    t = rows.pivot_table(index=GROUP, columns="route", values="us_per_call")
    runs = rows.pivot_table(index=GROUP, columns="route", values="us_runs", aggfunc="first")
    t["ELU / nn.ELU"] = [paired(r["elu_study.ELU"], r["nn.ELU"]).median() for _, r in runs.iterrows()]
    return t.reset_index()


def host_ratios(record: dict) -> pd.DataFrame:
    """Each route's time over nn.ELU's in the same round: median and p10-p90 of the paired ratios, per group."""
    rows = pd.DataFrame(record["host_cost"])
    runs = rows.pivot_table(index=GROUP, columns="route", values="us_runs", aggfunc="first")
    out = []
    for key, r in runs.iterrows():
        for route in r.index:
            q = paired(r[route], r["nn.ELU"])
            out.append({**dict(zip(GROUP, key)), "route": route, "ratio": q.median(), "p10": q.quantile(0.1),
                        "p90": q.quantile(0.9)})
    return pd.DataFrame(out)


def end_to_end(record: dict) -> pd.DataFrame:
    """One row per configuration: both times (medians), the drop-in's ratio (the median of the rounds' paired
    ratios), the noise (half the p10-p90 spread of those ratios), ELU's share of the eager nn.ELU step, and
    whether the drop-in is slower, or faster, beyond the tie (the larger of the noise and 2 %)."""
    t = pd.DataFrame(record["end_to_end"])
    wide = t.pivot_table(index=CONFIG, columns="elu", values=["ms", "elu_ms", "ms_runs"], aggfunc="first")
    ratios = [paired(d, n) for d, n in zip(wide[("ms_runs", "drop-in")], wide[("ms_runs", "nn.ELU")])]
    out = pd.DataFrame({"nn.ELU ms": wide[("ms", "nn.ELU")], "drop-in ms": wide[("ms", "drop-in")]})
    out["ratio"] = [r.median() for r in ratios]
    out["noise"] = [(r.quantile(0.9) - r.quantile(0.1)) / 2 for r in ratios]
    # ELU's share from the eager nn.ELU step of the same model, dtype and mode: compiled, ELU sits inside fused
    # kernels whose whole time would count.
    share = (wide[("elu_ms", "nn.ELU")] / out["nn.ELU ms"]).xs(False, level="compiled")
    out = out.reset_index()
    out["ELU share"] = [share[(m, d, mode)] for m, d, mode in zip(out["model"], out["dtype"], out["mode"])]
    tie = out["noise"].clip(lower=TIE)
    out["slower"] = out["ratio"] - 1 > tie
    out["faster"] = 1 - out["ratio"] > tie  # symmetric: faster beyond the tie too
    return out


def summary(record: dict) -> pd.DataFrame:
    """The issue's bars, each with its count: host cost, no slower step, faster where ELU matters, checks."""
    rows = []
    if record.get("host_cost"):
        h = host(record)
        rows.append({"bar": "host cost per call at or under nn.ELU's (size x grad x autocast groups)",
                     "met": int((h["ELU / nn.ELU"] <= 1).sum()), "of": len(h)})
    if record.get("end_to_end"):
        e = end_to_end(record)
        matters = e[~e["compiled"] & (e["ELU share"] >= MATTERS)]  # compiled, the study's kernel does not run
        rows.append({"bar": "whole steps no slower than with nn.ELU beyond max(noise, 2 %)",
                     "met": int((~e["slower"]).sum()), "of": len(e)})
        rows.append({"bar": "eager steps faster beyond max(noise, 2 %) where ELU is at least 5 % of the step",
                     "met": int(matters["faster"].sum()), "of": len(matters)})
    if record.get("checks"):
        c = checks(record)
        rows.append({"bar": "checks passed", "met": int(c["passed"].sum()), "of": len(c)})
    return pd.DataFrame(rows)


def graded(value: float, lo: float, hi: float) -> str:
    """A prediction's grade: HELD inside [lo, hi], else MISSED and which way."""
    if lo <= value <= hi:
        return "HELD"
    return "MISSED (lower)" if value < lo else "MISSED (higher)"


def accuracy(record: dict) -> pd.DataFrame:
    """Worst ulp over every negative float32, by alpha, for the drop-in's float32 default and F.elu."""
    t = pd.DataFrame(record["checks"]["accuracy"]["worst_ulp_by_alpha"]).T
    t.index.name = "alpha"
    return t


def bits(record: dict) -> pd.DataFrame:
    return pd.DataFrame(record["checks"]["bits"]["by_dtype"]).T


def profile(record: dict) -> pd.DataFrame:
    return pd.DataFrame(record["host_profile"])


def predictions(record: dict) -> pd.DataFrame:
    """Notebook 11's predictions, written before the run, each graded on the record: (what, measured, lo, hi)."""
    acc, h, e = accuracy(record), host(record), end_to_end(record)
    r = host_ratios(record).set_index([*GROUP, "route"])["ratio"].unstack("route")
    ops_x = r["torch.ops"] / r["elu_study.ELU"]  # both over nn.ELU in the same round
    no_grad = h[~h["requires_grad"]]
    cheapest = no_grad[["nn.ELU", "F.elu", "binding", "torch.ops", "elu_study.ELU"]].idxmin(axis=1)
    eager, compiled = e[~e["compiled"]], e[e["compiled"]]
    bf16 = eager[(eager["dtype"] != "float32") & (eager["ELU share"] >= MATTERS)]
    f32 = eager[eager["dtype"] == "float32"]
    small = eager[eager["model"].str.startswith("MLP 4x256")]
    rows = [
        ("1. float32 default, worst ulp at alpha = 1", acc.loc["1", "elu_study.ELU"], 1.0, 2.0),
        ("1. F.elu, worst ulp at alpha = 1", acc.loc["1", "F.elu"], 0.5, 1.5),
        ("1. checks failed", int((~checks(record)["passed"]).sum()), 0, 0),
        ("2. ELU / nn.ELU host time, lowest group", h["ELU / nn.ELU"].min(), 0.75, 1.0),
        ("2. ELU / nn.ELU host time, highest group", h["ELU / nn.ELU"].max(), 0.75, 1.0),
        ("3. no-grad groups where the binding is not the cheapest", int((cheapest != "binding").sum()), 0, 0),
        ("4. torch.ops / ELU host time, lowest group", ops_x.min(), 1.2, 2.5),
        ("4. torch.ops / ELU host time, highest group", ops_x.max(), 1.2, 2.5),
        ("5. eager bf16 steps with ELU >= 5 % where the drop-in is not faster beyond the tie",
         int((~bf16["faster"]).sum()), 0, 0),
        ("6. eager float32 steps slower beyond the tie", int(f32["slower"].sum()), 0, 0),
        ("6. eager float32 drop-in / nn.ELU, lowest", f32["ratio"].min(), 0.97, 1.01),
        ("6. eager float32 drop-in / nn.ELU, highest", f32["ratio"].max(), 0.97, 1.01),
        ("7. compiled drop-in / nn.ELU, lowest", compiled["ratio"].min(), 0.98, 1.02),
        ("7. compiled drop-in / nn.ELU, highest", compiled["ratio"].max(), 0.98, 1.02),
        ("8. small MLP eager drop-in / nn.ELU, highest", small["ratio"].max(), 0.9, 1.0),
    ]
    return pd.DataFrame([{"prediction": w, "measured": v, "range": f"{lo:g} to {hi:g}", "grade": graded(v, lo, hi)}
                         for w, v, lo, hi in rows])
