"""The README's first screen (templates/report/front.md.j2) and its checks (templates/report/checks.md.j2)."""

import json
from pathlib import Path

import pandas as pd

from elu_study.core import entries, fingerprint, record, tables, text
from elu_study.core.paths import NOTEBOOKS_DIR
from elu_study.jobs.records import BY_NAME as STAGES
from elu_study.jobs.sixteen.analysis import DEFAULT as STEP7
from elu_study.jobs.study import figures as plots

BLOCK, FIGURE = "front", "steps"
REFERENCE = "F.elu"  # PyTorch's op: every dtype's reference row


def step_entries() -> list[entries.Entry]:
    """The table's rows: every step and F.elu (float32), then step 7 and F.elu on each 16-bit dtype."""
    sixteen = [entries.ENTRIES[f"{name} {dtype}"] for dtype in entries.DTYPES16 for name in (STEP7, REFERENCE)]
    return [*entries.STEPS, entries.ENTRIES[REFERENCE], *sixteen]


def table_entries() -> list[entries.Entry]:
    """The README table's rows: step_entries(), each dtype's after its own copy_, the roof its ratios and energy per
    pass are read against."""
    return list(dict.fromkeys(x for e in step_entries() for x in (entries.ENTRIES[entries.roof_of(e.name, e.mode)], e)))


def worst_ulp(entry: entries.Entry, row: dict, runs: dict) -> str:
    """A float32 row's worst ulp over every input (its file's formula's) at each alpha of the accuracy record's
    ``runs``, joined by " / "; a 16-bit row's exhaustive check's result; a roof's: none, it computes no ELU."""
    if entry.name.split()[0] == "copy_":
        return "a copy"
    if entry.dtype in entries.DTYPES16:
        if not row.get("exhaustive"):
            return "the reference" if entry.name.split()[0] == REFERENCE else "not checked"
        mismatches = row["exhaustive"]["mismatches"]
        return "bit-exact" if mismatches == 0 else f"{mismatches:,} mismatches"
    kernel, first = entries.KERNELS.get(entry.variant), next(iter(runs.values()))
    formula = kernel.formula if kernel else entry.name
    if formula not in first["formulas"]:
        return "not in the accuracy record"
    if differ := first["same_as"].get(entry.variant, {}).get("n_differ"):
        return f"{differ:,} inputs differ from {formula}"
    ulps = [max(side["ulp"] for side in run["formulas"][formula]["max_ulp"].values()) for run in runs.values()]
    return " / ".join(f"{u:.2f}" if u < 100 else f"{u:,.0f}" for u in ulps)


def sustained(r: dict) -> dict | None:
    """A row's sustained x own roof, J per pass and whether it was at the power limit; None unless timed so."""
    if r.get("x_roof_sustained") is None:
        return None
    return {"x": r["x_roof_sustained"], "j": r["timing"]["sustained"].get("energy_j"), "capped": capped(r)}


def capped(r: dict) -> bool:  # most of a row's sustained samples at the power limit (False: not timed so)
    return ((r["timing"].get("sustained") or {}).get("capped_fraction") or 0) >= 0.5


def steps_frame(study: dict, accuracy: dict) -> pd.DataFrame:
    """One line per table_entries() row: ms, x own copy_ (and sustained, with J per pass), TB/s and worst ulp."""
    rows = {r["name"]: r for r in study["rows"]}
    regimes = any(r["timing"].get("sustained") for r in study["rows"])

    def line(e: entries.Entry) -> dict:
        if (r := rows.get(e.name)) is None:
            return {"entry": e.name, "worst ulp": entries.NOT_MEASURED}
        held = sustained(r) or {}
        both = {"x own copy_, sustained": held.get("x"), "J per pass, sustained": held.get("j")} if regimes else {}
        return {"entry": e.name, "ms": r["timing"]["median_ms"], "x own copy_": r["x_roof"], **both,
                "TB/s": r["tbps"], "worst ulp": worst_ulp(e, r, accuracy["runs"])}

    return pd.DataFrame([line(e) for e in table_entries()]).set_index("entry")


def measured(study: dict) -> list[dict]:
    """The record's rows of step_entries(), in their order."""
    rows = {r["name"]: r for r in study["rows"]}
    return [rows[e.name] for e in step_entries() if e.name in rows]


def figure(study: dict):
    """Each measured row of the table over its own copy_, a panel per dtype on one scale."""
    df = pd.DataFrame(measured(study))
    panels = {k: list(g["name"]) for k, g in df.groupby(df["dtype"] + ", over " + df["roof"], sort=False)}
    return plots.roofs_figure(study, panels, plots.label("steps_title", gpu=study["provenance"]["gpu"]), one_scale=True)


def gpus_frame(best: str, results_dir: Path | None = None) -> pd.DataFrame:
    """One line per GPU with a main record, the reference first: copy_'s time and its floors, then ``best`` (the
    fastest float32 step on the reference), F.elu and step 7 over their own copy_, short / sustained, how many of its
    sustained rows ran mostly at the power limit, and which of the table's kernel builds changed since."""
    out = []
    for gpu in record.gpus(results_dir):
        study = record.load(gpu, results_dir=results_dir)
        rows = {r["name"]: r for r in study["rows"]}
        floors = (study.get("stream_floor_ms"), study.get("floor_ms"))  # None: no such rows, no datasheet figure
        line = {"GPU": study["provenance"]["gpu"], "copy_ ms": rows["copy_"]["timing"]["median_ms"],
                "floors ms, streams / datasheet": " / ".join("n/a" if f is None else f"{f:.2f}" for f in floors)}
        for name in (best, REFERENCE, *(f"{STEP7} {d}" for d in entries.DTYPES16)):
            r = rows.get(name, {})
            both = [r.get("x_roof"), r.get("x_roof_sustained")]
            line[name] = " / ".join(f"{x:.3f}" for x in both if x is not None) or entries.NOT_MEASURED
        held = [r for r in study["rows"] if r["timing"].get("sustained")]
        line["at the power limit"] = f"{sum(map(capped, held))} of {len(held)} sustained rows"
        line["kernel builds changed since"] = changed_kernels(study) or "none"  # its numbers are an earlier build's
        out.append(line)
    return pd.DataFrame(out).set_index("GPU")


def notebooks(folder: Path = NOTEBOOKS_DIR) -> list[tuple[str, str]]:
    """(title, file name) of each notebook: its first heading, without the study's name before a dash."""
    found = []
    for path in sorted(folder.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        heading = next(line for c in cells if c["cell_type"] == "markdown"
                       for line in "".join(c["source"]).splitlines() if line.startswith("#"))
        found.append((heading.lstrip("# ").split(" \u2014 ")[-1], path.name))
    return found


def checks(gpu: str) -> dict | None:
    """What checks.md.j2 fills in from the sanitize and tests records (None where either is missing)."""
    sanitize, tests = record.load(gpu, "sanitize", required=False), record.load(gpu, "tests", required=False)
    if not (sanitize and tests):
        return None
    errors = [v["errors"] for tools in sanitize["builds"].values() for v in tools.values()]
    return {"builds": len(sanitize["builds"]), "tools": sanitize["tools"], "errors": sum(e or 0 for e in errors),
            "unread": errors.count(None), "counts": tests["counts"], "failures": tests["failures"],
            "examples": tests["fuzz"]["examples_per_test"],
            "at": [f"on {r['provenance']['date_utc'][:10]}" for r in (sanitize, tests)],
            "records": [record.record_path(gpu, job).name for job in ("sanitize", "tests")],
            "due": [bool(STAGES[job].due(gpu, None)) for job in ("sanitize", "tests")]}  # inputs changed since


def numbers(gpu: str = record.REFERENCE_GPU) -> dict:
    """What front.md.j2 fills in, from ``gpu``'s main and accuracy records and step 6's and 7's sustained runs."""
    study, accuracy = record.load(gpu), record.load(gpu, "accuracy")
    rows, steps = {r["name"]: r for r in study["rows"]}, steps_frame(study, accuracy)
    best = min((r for r in study["rows"] if r["kind"] == "step"), key=lambda r: r["x_copy"])
    # a row's sustained runs, lowest first: the main record's and its step's own job's (beyond, sixteen) where that
    # record ran this tree's build of it; the verdict gives the worst, since runs of one build differ by more than a
    # run's own spread
    held, known = [study] + [r for r in (record.load(gpu, job, required=False) for job in ("beyond", "sixteen")) if r], {}
    pooled = {n: sorted(((r["x_roof_sustained"], rec, r) for rec in held for r in rec["rows"]
                         if r["name"] == n and r.get("x_roof_sustained") is not None
                         and (rec is study or tables.this_build(rec, n, known))), key=lambda t: t[0])
              for n in (best["name"], *(f"{STEP7} {d}" for d in entries.DTYPES16))}
    runs = {n: [x for x, _, _ in p] for n, p in pooled.items()}
    _, slowest_record, slowest = pooled[best["name"]][-1] if pooled[best["name"]] else (None, study, best)
    # a tie with the row's copy_: its slowest run no further from 1 than its runs are from each other
    ties = {n: len(x) > 1 and abs(1 - x[-1]) <= x[-1] - x[0] for n, x in runs.items()}
    return {"runs": runs, "ties": ties, "gpu": study["provenance"]["gpu"], "study": study, "rows": rows, "best": best,
            "step7": STEP7,
            "unsettled": [f"`{r['name']}`" for r in measured(study) if (r["timing"].get("sustained") or {})
                          .get("settled") is False],
            # the slowest run's: at the power limit, and its own record's copy_ too?
            "best_sustained": sustained(slowest), "roof_capped": capped(record.row(slowest_record, "copy_")),
            "step7_runs": max(len(pooled[f"{STEP7} {d}"]) for d in entries.DTYPES16),
            "exact": all(steps.loc[f"{STEP7} {d}", "worst ulp"] == "bit-exact" for d in entries.DTYPES16),
            "ulp": steps.loc[best["name"], "worst ulp"].split(" / ")[0], "alphas": list(accuracy["runs"]),
            "dtypes": entries.DTYPES16, "exhaustive": rows[f"{STEP7} {entries.DTYPES16[0]}"]["exhaustive"],
            "records": (record.record_path(gpu).name, record.record_path(gpu, "accuracy").name),
            "steps": steps.rename(columns={"worst ulp": f"worst ulp, alpha {' / '.join(accuracy['runs'])}"}),
            "figure": record.readme_link(record.figure_path(gpu, FIGURE)), "notebooks": notebooks(),
            "gpus": gpus_frame(best["name"]),
            "stale": changed_kernels(study), "stale_ulp": changed_kernels(accuracy, steps_shown=True)}


def changed_kernels(study: dict, steps_shown: bool = False) -> str:
    """The table's kernel files whose build changed since the record: "every kernel's build" where all those it
    measured did, else "the builds of" their names; "" where none did (``fingerprint.earlier_variants``).
    ``steps_shown``: of a record without the table's rows (the accuracy record), the table's kernel files."""
    shown = {v for e in (step_entries() if steps_shown else (entries.ENTRIES[r["name"]] for r in measured(study)))
             if (v := e.variant)}
    stale = fingerprint.earlier_variants(study) & shown
    named = [f"`{v}`" for v in sorted(stale)]
    return "every kernel's build" if shown and shown <= stale else f"the builds of {', '.join(named)}" if named else ""


def blocks(gpu: str = record.REFERENCE_GPU) -> dict[str, str]:
    """The README's first screen, and its checks where both records exist."""
    found = checks(gpu)
    return {BLOCK: text.render("report/front.md.j2", **numbers(gpu))} | (
        {"checks": text.render("report/checks.md.j2", **found)} if found else {})


def regime_points(study: dict) -> dict[str, tuple[tuple, tuple]]:
    """For ``figures.regimes_figure``: name -> ((MHz, x own roof, p10 x, p90 x) short, the same sustained)."""
    points = {}
    for r in measured(study):
        both = (r["timing"], r["timing"].get("sustained") or {})
        if r.get("x_roof_sustained") is not None and all(t.get("sm_clock_mhz") is not None for t in both):
            points[r["name"]] = tuple((t["sm_clock_mhz"], x, lo, hi) for t, (lo, x, hi, _) in zip(both, plots.regimes(r)))
    return points


def regimes_frame(study: dict) -> pd.DataFrame:
    """``regime_points``' rows and their roofs: x own roof, MHz and share at the power limit, short and sustained."""
    points = regime_points(study)
    shown = set(points) | {r["roof"] for r in study["rows"] if r["name"] in points}  # with their copy_ rows
    return pd.DataFrame([{
        "entry": r["name"], "x own roof": r["x_roof"], "MHz": r["timing"]["sm_clock_mhz"],
        "at the limit": r["timing"]["capped_fraction"], "x sustained": r["x_roof_sustained"],
        "MHz sustained": alone["sm_clock_mhz"], "W sustained": alone["power_w"], "J per pass sustained": alone["energy_j"],
        "at the limit sustained": alone["capped_fraction"],
    } for r in study["rows"] if r["name"] in shown and (alone := r["timing"].get("sustained"))]).set_index("entry")


def write_figure(gpu: str) -> list[Path]:
    """The steps' figure (notebook 08 draws the regimes' one)."""
    return [record.save_figure(figure(record.load(gpu)), record.figure_path(gpu, FIGURE))]
