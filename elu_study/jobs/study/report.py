"""The main study's report, regenerated from its record with no GPU: the table, its caption, the
figures under results/ and the README's results block."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from elu_study.core import record
from elu_study.core.check import ATOL
from elu_study.core.entries import DTYPES16, PEERS, STEPS, grid_stride_blocks, group, is_backward
from elu_study.core.tables import markdown
from elu_study.jobs.study import figures as plots

ZOOM = ("copy_", "copy_kernel", "F.elu", "torch.compile(F.elu)", "F.elu_", *(e.name for e in STEPS),
        *(e.name for e in PEERS))
WAVE_SWEEP = ("3_grid_stride_1_waves", "3_grid_stride_2_waves", "3_grid_stride_8_waves", "3_grid_stride_64_waves",
              "3_grid_stride_512_waves", "3_grid_stride_one_shot")
STEP5_ABLATIONS = ("2_float4", *(e.name for e in group("step5_one_change")), "5_streaming", "5_streaming_expf")
README_BLOCK = "results-table"
KINDS_SHOWN = ("step", "baseline", "peer")  # the README table's rows
FRONT_FIGURE = "xcopy"  # the figure the README's first screen shows (jobs/report/front.py)


def frame(rec: dict, kinds=("step", "baseline", "peer")) -> pd.DataFrame:
    """One line per entry: time, bandwidth, share of the datasheet peak, ratio to copy_, verdict."""
    rows = [r for r in rec["rows"] if r["kind"] in kinds]
    df = pd.DataFrame(
        {
            "entry": [r["name"] for r in rows],
            "what": [r["what"] for r in rows],
            "ms": [r["timing"]["median_ms"] for r in rows],
            "TB/s": [r["tbps"] for r in rows],
            "% of peak": [r["pct_of_peak"] for r in rows],
            "x copy_": [r["x_copy"] for r in rows],
            "p90/median": [r["timing"]["p90_ms"] / r["timing"]["median_ms"] for r in rows],
            "correct": [("yes" if r["check"]["passed"] else "NO") if r["check"] else "n/a" for r in rows],
            "max abs err vs fp64": [r["check"]["max_abs_err_vs_fp64"] if r["check"] else None for r in rows],
        }
    )
    return df.set_index("entry")


def own_roof_rows(rec: dict) -> list[dict]:
    """The rows timed against a roof of their own (a 16-bit dtype's copy_, or a backward's torch.add), the roofs
    themselves left out; none in a record made before the main study held them."""
    return [r for r in rec["rows"] if r.get("roof") not in (None, "copy_") and r["name"] != r["roof"]]


REFERENCES = {"F.elu": "the reference", "aten.elu_backward": "the reference"}


def exactness(r: dict) -> str:
    """A row's check in a few words: mismatching outputs over every input and alpha (16-bit), or the float32
    backward's against aten's; blank where the row is a reference or a roof."""
    if r.get("exhaustive"):
        c = r["exhaustive"]
        grads = f" x {c['grads']} grads" if c.get("grads") else ""
        return f"{c['mismatches']:,} of {c['inputs']:,} inputs x {c['alphas']} alphas{grads}"
    if r.get("check") and "bit_mismatches" in r["check"]:
        c = r["check"]
        return f"{'within' if c['passed'] else 'NOT within'} {ATOL:g} of aten; {c['bit_mismatches']:,} bits differ"
    return REFERENCES.get(r["name"].split()[0], "not checked")


def roofs_frame(rec: dict) -> pd.DataFrame:
    """Every row with a roof of its own, by dtype and direction, fastest first: time over that roof, its
    spread, and its check (mismatches over the exhaustive check's inputs and alphas)."""
    rows = own_roof_rows(rec)
    df = pd.DataFrame({
        "entry": [r["name"] for r in rows],
        "dtype": [r["mode"] or "float32" for r in rows],
        "roof": [r["roof"] for r in rows],
        "x own roof": [r["x_roof"] for r in rows],
        "p90/median": [r["timing"]["p90_ms"] / r["timing"]["median_ms"] for r in rows],
        "mismatches": [exactness(r) for r in rows],
    })
    order = {d: i for i, d in enumerate(("float32", *DTYPES16))}
    df["_order"] = [order[d] * 2 + is_backward(n) for d, n in zip(df["dtype"], df["entry"])]
    return df.sort_values(["_order", "x own roof"], kind="stable").drop(columns="_order").set_index("entry")


def roof_panels(rec: dict) -> dict[str, list[str]]:
    """The roofs figure's panels: each dtype's forward (over its copy_) and backward (over its torch.add)."""
    panels: dict[str, list[str]] = {}
    for r in sorted(own_roof_rows(rec), key=lambda r: (r["mode"] in DTYPES16, r["mode"])):
        dtype = r["mode"] or "float32"
        key = f"{dtype} {'backward, over torch.add' if is_backward(r['name']) else 'forward, over copy_'}"
        panels.setdefault(key, []).append(r["name"])
    return panels


def readme_frame(rec: dict) -> pd.DataFrame:
    """The README's table: the main entries, fastest first, with x copy_ (copy_'s time is on the first screen)."""
    return frame(rec)[["x copy_"]].sort_values("x copy_", kind="stable")


def caption(rec: dict) -> str:
    """Where, with what and how the record was measured, in three short sentences."""
    p = rec["provenance"]
    floor = (f"datasheet floor {rec['floor_ms']:.2f} ms ({rec['peak_source']})" if rec["floor_ms"]
             else "no datasheet figure for this GPU")
    if rec.get("stream_floor_ms"):
        floor += f"; measured stream floor {rec['stream_floor_ms']:.2f} ms (read_only + write_only)"
    method = rec.get("method", {})
    rounds = f" in {method['rounds']} interleaved rounds" if method.get("rounds") else ""
    runs = sorted({r["timing"]["runs"] for r in rec["rows"]})
    runs_text = f"{runs[0]}" if len(runs) == 1 else f"{runs[0]}-{runs[-1]}"
    return (
        f"{p['gpu']} ({p['sm_count']} SMs), driver {p['driver']}, CUDA {p['cuda_runtime']}, torch {p['torch']}, "
        f"nvcc {p['nvcc']}, {p['date_utc'][:10]}. Shape {tuple(rec['problem']['shape'])} float32; {floor}. "
        f"Median of {runs_text} CUDA-event-timed runs per entry{rounds}."
    )


def present(rec: dict, names) -> list[str]:
    """The names a record holds (a record made before an entry existed lacks its row)."""
    held = {r["name"] for r in rec["rows"]}
    return [n for n in names if n in held]


def by_speed(rec: dict, names) -> list[str]:
    """The names, fastest first (by x copy_)."""
    return sorted(names, key=lambda n: record.row(rec, n)["x_copy"])


def wave_blocks(rec: dict) -> dict[str, int]:
    """Grid size of every grid-stride entry at the record's size, on the record's GPU."""
    sms, numel = rec["provenance"]["sm_count"], rec["problem"]["numel"]
    return {n: grid_stride_blocks(n, sms, numel) for n in (*WAVE_SWEEP, "3_grid_stride")}


def figures(rec: dict, counters: dict | None, only: str | None = None) -> dict[str, object]:
    """name -> matplotlib figure, for every figure the README and notebooks show (or just ``only``)."""
    makers = {
        "times": lambda: plots.times_figure(rec),
        "xcopy": lambda: plots.xcopy_figure(rec, names=by_speed(rec, present(rec, ZOOM)),
                                            title=f"Against the roof, fastest first: {rec['provenance']['gpu']}"),
        "distributions": lambda: plots.distribution_figure(rec, names=present(rec, ZOOM)),
        "waves": lambda: plots.wave_sweep_figure(rec, list(WAVE_SWEEP), wave_blocks(rec)),
        "ablations": lambda: plots.xcopy_figure(rec, names=list(STEP5_ABLATIONS), kinds=None,
                                                title="Step 5's changes, one at a time, from step 2"),
    }
    if own_roof_rows(rec):
        makers["roofs"] = lambda: plots.roofs_figure(rec, roof_panels(rec))
    if counters:
        makers["counters"] = lambda: plots.counters_figure(counters, [r["name"] for r in counters["rows"]])
    if only is not None:
        if only not in makers:
            raise KeyError(f"no figure {only!r}; figures: {', '.join(makers)}")
        makers = {only: makers[only]}
    return {name: make() for name, make in makers.items()}


def figure_names(rec: dict, counters: dict | None) -> list[str]:
    """The figures ``figures`` draws, by the name each is saved under (results/<gpu>[-<name>].png)."""
    return ["", "xcopy", "distributions", "waves", "ablations", *(["roofs"] if own_roof_rows(rec) else []),
            *(["counters"] if counters else [])]


def checked_line(rec: dict) -> str:
    """Whether every checked entry passed its check, naming any that did not."""
    checked = [r for r in rec["rows"] if r["kind"] in KINDS_SHOWN and r["check"]]
    failed = [r["name"] for r in checked if not r["check"]["passed"]]
    if failed:
        return f"Correctness checks FAILED for {', '.join(f'`{n}`' for n in failed)}."
    return f"All {len(checked)} entries that compute ELU pass their check against float64." + exhaustive_line(rec)


def exhaustive_line(rec: dict) -> str:
    """The 16-bit rows' exhaustive checks in one sentence: how many, over what, and who mismatched."""
    rows = [r for r in rec["rows"] if r.get("exhaustive")]
    if not rows:
        return ""
    c = rows[0]["exhaustive"]
    bad = [f"`{r['name']}` ({r['exhaustive']['mismatches']:,})" for r in rows if r["exhaustive"]["mismatches"]]
    return (f" At 16 bits, {len(rows)} rows ran on all {c['inputs']:,} inputs at {c['alphas']} alphas, bit for bit against "
            f"PyTorch: {'mismatches only in ' + ', '.join(bad) if bad else 'no mismatch'}.")


def readme_block(rec: dict, counters: dict | None, figure_paths: list[Path] | None = None) -> str:
    """The README's results block: the table (fastest first), its caption and checks, and the figures."""
    gpu = rec["provenance"]["gpu"]
    paths = figure_paths or [record.figure_path(gpu, name) for name in figure_names(rec, counters)]
    front = record.figure_path(gpu, FRONT_FIGURE)  # shown on the first screen already
    lines = [markdown(readme_frame(rec)), "", caption(rec), checked_line(rec), "",
             "The findings are on the first screen; [06_summary](notebooks/06_summary.ipynb) gives each in full.", "",
             *(f"![{p.stem}]({record.readme_link(p)})" for p in paths if Path(p).name != front.name)]
    return "\n".join(lines)


def write_report(gpu: str, readme: bool = True) -> list[Path]:
    """Save every figure of a GPU's study record under results/ and, with ``readme``, the README block."""
    rec = record.load(gpu)
    counters = record.load(gpu, "ncu", required=False)
    paths = [record.save_figure(fig, record.figure_path(rec["provenance"]["gpu"], "" if name == "times" else name))
             for name, fig in figures(rec, counters).items()]
    if readme:
        paths.append(record.write_block(README_BLOCK, readme_block(rec, counters, paths)))
    return paths
