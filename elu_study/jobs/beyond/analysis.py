"""What step 6's record says (no GPU): the numbers that ``templates/beyond/*.md.j2`` put in words, and the tables
beside them."""

from __future__ import annotations

import pandas as pd

from elu_study.core import text
from elu_study.core.entries import STEP6_DEFAULT
from elu_study.core.hardware import ISSUE_BOUND_RULE, issue_bound
from elu_study.core.ncu import counter_rows, issue_pct
from elu_study.core.record import figure_path, noise, readme_link, record_path, row
from elu_study.core.tables import markdown

AIM = 0.98  # step 6's aim: at most 0.98x copy_'s time, in the recorded run and in every fresh process
MUST = 1.0  # step 6's must: at most copy_'s time in every process, by more than the round-to-round noise


def float32_rows(record: dict) -> list[dict]:
    return [r for r in record["rows"] if r["mode"] in ("", "in_place") and r["name"] not in ("read_only", "write_only")]


def summary_frame(record: dict) -> pd.DataFrame:
    """One row per attempt: time, x copy_, spread, and the DRAM counters beside it."""
    counters, rows = counter_rows(record), []
    for r in record["rows"]:
        t, c = r["timing"], counters.get(r["name"], {})
        rows.append({"entry": r["name"], "ms": t["median_ms"], "x copy_": r["x_copy"],
                     "p10-p90 %": 100 * (t["p90_ms"] - t["p10_ms"]) / t["median_ms"], "TB/s": r["tbps"],
                     "DRAM % peak": c.get("dram_pct_of_peak"),
                     "DRAM GB read": c["dram_read_bytes"] / 1e9 if c else None,
                     "DRAM GB written": c["dram_write_bytes"] / 1e9 if c else None, "what": r["what"]})
    return pd.DataFrame(rows)


def reached(xs: list[float]) -> str:
    """How many of these runs reached the aim: "in every one", "in none", or "in k of n"."""
    k = sum(v <= AIM for v in xs)
    return ("**reached** in every one" if k == len(xs) else "reached in none" if k == 0
            else f"reached in {k} of {len(xs)}")


def confirmed(record: dict) -> dict:
    """{attempt: (recorded x copy_, [x copy_ in each fresh process])} of ``python -m elu_study beyond --confirm``."""
    c = record.get("confirmation", {})
    return {n: (row(record, n)["x_copy"], [p[n]["x_copy"] for p in c["processes"]]) for n in c.get("names", [])}


def sixteen_bit(record: dict, dtype: str = "bfloat16") -> dict:
    """Step 6 on 16-bit storage: x float32 copy_, x its own 16-bit copy_ (copy_ of the bfloat16 tensor), issue %."""
    r, pct = row(record, f"6_beyond_copy {dtype}"), issue_pct(record, f"6_beyond_copy {dtype}")
    return {"x_copy": r["x_copy"], "issue_pct": pct, "issue_bound": issue_bound(pct),
            "x_own_copy": r["timing"]["median_ms"] / row(record, "copy_ bfloat16")["timing"]["median_ms"]}


def goals(record: dict) -> tuple[bool, bool]:
    """Step 6 as built by default: (the must met?, the aim met?) over the recorded run and every fresh process."""
    x6 = row(record, "6_beyond_copy")["x_copy"]
    xs = [p["6_beyond_copy"]["x_copy"] for p in record.get("processes", [])] + [x6]
    return all(v <= MUST for v in xs) and (1 - x6) > noise(record, "6_beyond_copy", "copy_"), all(v <= AIM for v in xs)


def dram(record: dict) -> dict | None:
    """The float32 kernels' DRAM counters against 6_base's (None without counters): same bytes? each one's
    distance to 'time set by DRAM throughput alone' through 6_base; which drove the DRAM harder."""
    c = counter_rows(record)
    rows = [r for r in float32_rows(record) if c.get(r["name"], {}).get("dram_pct_of_peak")]
    if "6_base" not in c or not rows:
        return None
    base = c["6_base"]
    k = row(record, "6_base")["x_copy"] * base["dram_pct_of_peak"]
    dev = {r["name"]: r["x_copy"] / (k / c[r["name"]]["dram_pct_of_peak"]) - 1 for r in rows}
    moved = ("dram_read_bytes", "dram_write_bytes")
    return {"c": c, "base": base, "n": len(rows), "dev": dev, "worst": max(dev, key=lambda n: abs(dev[n])),
            "inside": sum(abs(v) <= 0.01 for v in dev.values()),
            "other": [n for n in dev if any(abs(c[n][b] / base[b] - 1) >= 0.01 for b in moved)],
            "better": sorted((n for n in dev if c[n]["dram_pct_of_peak"] > base["dram_pct_of_peak"] + 0.2),
                             key=lambda n: -c[n]["dram_pct_of_peak"])}


def numbers(record: dict) -> dict:
    """Everything the beyond templates print, from the record."""
    rows = {r["name"]: r for r in record["rows"]}
    best = min((r for r in float32_rows(record) if r["kind"] in ("attempt", "step")), key=lambda r: r["x_copy"])
    shown = [best] if best["name"] == "6_beyond_copy" else [best, rows["6_beyond_copy"]]
    must, aim = goals(record)
    confirmation = record.get("confirmation", {})
    return {"record": record, "rows": rows, "best": best, "aim": AIM, "must": MUST, "must_met": must, "aim_met": aim,
            "verdict": [{"row": r, "best": r is best, "noise": noise(record, r["name"], "copy_")} for r in shown],
            "step6_runs": [p["6_beyond_copy"]["x_copy"] for p in record.get("processes", [])],
            "confirmed": [{"name": n, "x": x, "xs": xs, "reached": reached([x, *xs]),
                           "noise": noise(record, n, "copy_")} for n, (x, xs) in confirmed(record).items()],
            "confirmation": confirmation.get("provenance", {}),
            "step6_confirmed": [p["6_beyond_copy"]["x_copy"] for p in confirmation.get("processes", [])],
            "b16": sixteen_bit(record), "dram": dram(record), "rule": ISSUE_BOUND_RULE,
            "bound": [n for n in rows if issue_bound(issue_pct(record, n))]}


def show(name: str, record: dict, **extra) -> text.Text:
    """``templates/beyond/<name>.md.j2`` filled from the record, for a notebook cell."""
    return text.show(f"beyond/{name}.md.j2", **numbers(record), **extra)


def attempt_counts(record: dict, base: str = "6_base") -> dict[str, list[str]]:
    """The attempt rows by how they differ from ``base``: one knob ("one"), more ("more"), one from step 6's new
    default ("round2"), or the same build called another way ("other")."""
    def knobs(r: dict) -> dict:
        return dict(f[2:].split("=", 1) for f in r["flags"] or () if f.startswith("-D") and "=" in f)
    ref = knobs(row(record, base))
    out: dict[str, list[str]] = {"one": [], "more": [], "round2": [], "other": []}
    for r in record["rows"]:
        if r["kind"] != "attempt" or r["name"] == base:
            continue
        own = knobs(r)
        kind = ("round2" if not r["mode"] and r.get("base") == STEP6_DEFAULT else
                "other" if r["mode"] or r.get("base") != base else
                "one" if sum(own.get(k) != ref.get(k) for k in {*own, *ref}) == 1 else "more")
        out[kind].append(r["name"])
    return out


def readme_block(record: dict) -> str:
    """The README's beyond block: where the numbers come from, step 6 and the confirmed attempts, the figure."""
    n, p = numbers(record), record["provenance"]
    rows = [("6_beyond_copy (step 6)", n["rows"]["6_beyond_copy"]["x_copy"], noise(record, "6_beyond_copy", "copy_"),
             n["step6_runs"], p.get("commit"))]
    rows += [(c["name"], c["x"], c["noise"], c["xs"], n["confirmation"].get("commit")) for c in n["confirmed"]]
    df = pd.DataFrame([{"build": b, "x copy_": x, "noise %": 100 * z,
                        "fresh processes": " ".join(f"{v:.3f}" for v in xs), "at commit": at,
                        f"aim {AIM:.2f}x": reached([x, *xs]).replace("*", "")}
                       for b, x, z, xs, at in rows]).set_index("build")
    figure = figure_path(p["gpu"], "beyond")
    return text.render("beyond/readme.md.j2", **n, p=p, counts=attempt_counts(record), default=STEP6_DEFAULT,
                       path=record_path(p["gpu"], "beyond").name, table=markdown(df, {"noise %": "{:.2f}"}),
                       figure=figure.stem, link=readme_link(figure))
