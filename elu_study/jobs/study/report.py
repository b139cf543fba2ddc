"""The main study's report from its record: the table, its caption, the figures and the README's results block."""

import textwrap
from pathlib import Path

import pandas as pd

from elu_study.core import record, text
from elu_study.core.check import ATOL
from elu_study.core.entries import DTYPES16, ENTRIES, KINDS, NOT_MEASURED, PEERS, STEPS, group
from elu_study.core.tables import FORMATS
from elu_study.core.timing import POWER_CAP
from elu_study.jobs.study import figures as plots

ZOOM = ("copy_", "copy_kernel", "F.elu", "torch.compile(F.elu)", "F.elu_", *(e.name for e in STEPS),
        *(e.name for e in PEERS))
WAVE_SWEEP = ("3_grid_stride_1_waves", "3_grid_stride_2_waves", "3_grid_stride_8_waves", "3_grid_stride_64_waves",
              "3_grid_stride_512_waves", "3_grid_stride_one_shot")
STEP5_ABLATIONS = ("2_float4", *(e.name for e in group("step5_one_change")), "5_streaming", "5_streaming_expf")
README_BLOCK = "results-table"
KINDS_SHOWN = ("step", "baseline", "peer")  # the README table's rows
CLOCK_MOVED = 0.05  # a row's SM clock moved between rounds when its round medians differ by more than this share
WIDTH = 120  # the command line's output fits a terminal this wide


def frame(rec: dict, kinds=KINDS_SHOWN, names=None) -> pd.DataFrame:
    """One line per entry of ``kinds`` (``names``: these, in order; one not in the record: not measured yet)."""
    held = {r["name"]: r for r in rec["rows"]}
    rows = [held[n] for n in names if n in held] if names is not None else rec["rows"]
    return pd.DataFrame([{
        "entry": r["name"], "what": r["what"], "ms": r["timing"]["median_ms"], "TB/s": r["tbps"],
        "% of peak": r["pct_of_peak"], "x copy_": r["x_copy"],
        "p90/median": r["timing"]["p90_ms"] / r["timing"]["median_ms"],
        "correct": ("yes" if r["check"]["passed"] else "NO") if r["check"] else "n/a",
        "max abs err vs fp64": r["check"]["max_abs_err_vs_fp64"] if r["check"] else None,
    } for r in rows if r["kind"] in kinds] + [{"entry": n, "what": ENTRIES[n].what, "correct": NOT_MEASURED}
                                             for n in names or () if n not in held]).set_index("entry")


def own_roof_rows(rec: dict) -> list[dict]:
    """The rows timed against a roof of their own (a 16-bit dtype's copy_, a backward's torch.add), but the roofs."""
    return [r for r in rec["rows"] if r.get("roof") not in (None, "copy_") and r["name"] != r["roof"]]


def roofs_frame(rec: dict) -> pd.DataFrame:
    """Every row with a roof of its own, by dtype and direction, fastest first: time over it, spread, check."""
    order = {d: i for i, d in enumerate(("float32", *DTYPES16))}
    df = pd.DataFrame([{
        "entry": r["name"], "dtype": r["dtype"], "roof": r["roof"], "x own roof": r["x_roof"],
        "p90/median": r["timing"]["p90_ms"] / r["timing"]["median_ms"],
        "mismatches": text.render("study/exactness.md.j2", r=r, atol=ATOL,
                                  reference=r["name"].split()[0] in ("F.elu", "aten.elu_backward")),
        "_order": order[r["dtype"]] * 2 + (r["direction"] == "backward"),
    } for r in own_roof_rows(rec)])
    return df.sort_values(["_order", "x own roof"], kind="stable").drop(columns="_order").set_index("entry")


def roof_panels(rec: dict) -> dict[str, list[str]]:
    """The roofs figure's panels: each dtype's forward (over its copy_) and backward (over its torch.add)."""
    panels: dict[str, list[str]] = {}
    for r in sorted(own_roof_rows(rec), key=lambda r: (r["dtype"] in DTYPES16, r["dtype"])):
        over = "backward, over torch.add" if r["direction"] == "backward" else "forward, over copy_"
        panels.setdefault(f"{r['dtype']} {over}", []).append(r["name"])
    return panels


def caption(rec: dict) -> str:
    """Where, with what and how the record was measured."""
    return text.render("study/caption.md.j2", rec=rec, shape=tuple(rec["problem"]["shape"]),
                       runs=sorted({r["timing"]["runs"] for r in rec["rows"]}))


def regime(rec: dict) -> dict:
    """The rows timed sustained, those unsettled, those at the power limit and those whose SM clock moved (MHz)."""
    sustained = {r["name"]: r["timing"]["sustained"] for r in rec["rows"] if r["timing"].get("sustained")}
    mhz = {r["name"]: [s["sm_clock_mhz"]["median"] for s in r["timing"].get("nvml", []) if s.get("samples")]
           for r in rec["rows"]}
    return {"sustained": list(sustained), "unsettled": [n for n, t in sustained.items() if t["settled"] is False],
            "capped": [r["name"] for r in rec["rows"] if (sustained.get(r["name"]) or {}).get("capped_fraction")
                       or any(set(POWER_CAP) & set(s.get("clock_event_reasons", ())) for s in r["timing"].get("nvml", []))],
            "moved": {n: (min(m), max(m)) for n, m in mhz.items() if m and max(m) > (1 + CLOCK_MOVED) * min(m)}}


def summary(rec: dict, live: bool) -> str:
    """The printed summary: every entry's times and checks, the rows over their own roofs, caption and regime."""
    formats = {c: f.format for c, f in {**FORMATS, "x own roof": "{:.3f}"}.items()}
    tables = [frame(rec, kinds=KINDS).drop(columns="what")]
    tables += [roofs_frame(rec).drop(columns="dtype")] if own_roof_rows(rec) else []
    return "\n\n".join(["NO GPU HERE: the tables are the recorded run."] * (not live) + [
        t.to_string(formatters=formats, na_rep="") for t in tables] + [fit(text.render(
            "study/main.md.j2", caption=caption(rec), rec=rec, regime=regime(rec), moved_pct=100 * CLOCK_MOVED))])


def fit(printed: str) -> str:
    """The command line's prose within WIDTH columns, each line wrapped (indented below itself)."""
    return "\n".join(textwrap.fill(
        line, WIDTH, subsequent_indent=" " * (len(line) - len(line.lstrip()) + 2), break_on_hyphens=False)
        for line in printed.splitlines())


def figure(rec: dict, counters: dict | None, name: str):
    """One of the figures notebook 06 shows, by name: xcopy, distributions, roofs or counters."""
    x = {r["name"]: r["x_copy"] for r in rec["rows"]}
    if name == "xcopy":
        return plots.xcopy_figure(rec, sorted((n for n in ZOOM if n in x), key=x.get),
                                  plots.label("fastest", gpu=rec["provenance"]["gpu"]))
    if name == "distributions":
        return plots.distribution_figure(rec, ZOOM)  # the rows it holds
    if name == "roofs":
        return plots.roofs_figure(rec, roof_panels(rec))
    if name == "counters":
        return plots.counters_figure(counters)
    raise ValueError(f"unknown figure {name!r}: xcopy, distributions, roofs or counters")


def readme_block(rec: dict) -> str:
    """The README's results block: the run's caption, checks (the 16-bit ones exhaustive) and figure."""
    path = record.figure_path(rec["provenance"]["gpu"], "")
    checked = [r for r in rec["rows"] if r["kind"] in KINDS_SHOWN and r["check"]]
    failed = [r["name"] for r in checked if not r["check"]["passed"]]
    checks = text.render("study/checked.md.j2", checked=len(checked), failed=failed,
                         exhaustive={r["name"]: r["exhaustive"] for r in rec["rows"] if r.get("exhaustive")})
    return text.render("study/readme.md.j2", caption=caption(rec), checked=checks, figure=path.stem,
                       link=record.readme_link(path))


def write_report(gpu: str, readme: bool = True) -> list[Path]:
    """Draw the times of a GPU's study record into results/<gpu>.png and, with ``readme``, write the README block."""
    rec = record.load(gpu)
    main = [r["name"] for r in rec["rows"] if r["kind"] in KINDS_SHOWN]
    title = f"ELU on {tuple(rec['problem']['shape'])} float32, {rec['provenance']['gpu']}"
    paths = [record.save_figure(plots.xcopy_figure(rec, main, title), record.figure_path(rec["provenance"]["gpu"], ""))]
    return paths + ([record.write_block(README_BLOCK, readme_block(rec))] if readme else [])
