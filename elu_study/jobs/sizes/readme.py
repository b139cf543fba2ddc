"""The numbers the sweep's words quote (``numbers``), and the README's sizes block (``block``). The words are the
templates' (elu_study/templates/sizes/); measured facts are stated as such, explanations labelled HYPOTHESIS."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from elu_study.core import text
from elu_study.core.paths import README
from elu_study.core.record import RecordError, figure_path, load, readme_link, record_path
from elu_study.jobs.sizes.analysis import custom, host_median_us, names, ok, point, small_sizes, us
from elu_study.jobs.sizes.figures import FIGURES
from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT

ALLOCATES = ("F.elu", "torch.compile(F.elu)", "nn.ELU", "elu_study.ELU")  # their timed call allocates its output
MODEL_ROUTES = ("binding", "F.elu", "elu_study.ELU")  # notebook 11's host routes, each call allocating


def other(gpu: str, job: str) -> dict | None:
    """The same GPU's record of another job; None where there is none or this code cannot read it."""
    try:
        return load(gpu, job, required=False)
    except RecordError:
        return None


def numbers(record: dict, main: dict | None = None, model: dict | None = None) -> dict:
    """Every number the README block, notebook 09's findings and the command line quote: the record's, the main
    study's time over copy_'s (``main``) and notebook 11's host cost (``model``), those two read where not given."""
    p, sizes, reg, held = record["provenance"], record["sizes"], record["regimes"], names(record)
    checked = [q["check"]["passed"] for q in record["points"] if q.get("check")]
    out = dict.fromkeys(("odd", "cub", "compiled", "like")) | {  # set below where the sweep has them
        "p": p, "file": record_path(p["gpu"], "sizes").name, "entries": held, "sizes": sizes, "ref": reg["reference"],
        "checked": len(checked), "passed": sum(checked), "errors": record["errors"], "bpe": BYTES_PER_ELEMENT,
        "full": reg["reference"] in held and "copy_" in held}
    if not out["full"]:
        return out
    ref, gain, top, small, kernels = reg["reference"], reg["warm_gain"], sizes[-1], small_sizes(record), custom(record)
    at = lambda c, n, mode="cold": us(record, c, n, mode)
    x_copy = lambda c, n: at(c, n) / at("copy_", n)
    paced = lambda c, n: max(at(c, n, "host"), at(c, n, "warm"))  # a loop of calls: the larger of the two
    host = {c: host_median_us(record, c, small) for c in held}
    grow = {c: at(c, top, "host") / host[c] for c in held} if top not in small and ok(point(record, ref, top)) else None
    mid = max((n for n in sizes if n < top and n & (n - 1) == 0), default=None)
    stream = record["floors"][str(top)]["stream_cold_ms"]
    l2, fit = record["l2_bytes"], reg["l2_fit_max_n"]
    out.update(lb=reg["launch_bound_max_n"], fit=fit, l2=l2, top=top, mid=mid, small=small, host=host, grow=grow,
               gain_fit=gain.get(str(fit)),
               beyond=[(n, gain[str(n)]) for n in sizes if BYTES_PER_ELEMENT * n >= 4 * l2 and str(n) in gain],
               dearer=[c for c in kernels if host[c] >= host[ref]], cheaper=[c for c in kernels if host[c] < host[ref]],
               wins={c: sum(paced(c, n) < paced(ref, n) for n in small) for c in kernels},
               x_top={c: x_copy(c, top) for c in held}, floor_top=stream and 1e3 * stream / at("copy_", top),
               allocates=[c for c in ALLOCATES if c in held])
    if {4096, 4097} <= set(sizes) and "2_float4" in held:  # an odd length: the float4 steps' scalar tail
        out["odd"] = (at("2_float4", 4097, "warm"), at("2_float4", 4096, "warm"))
    if "torch.compile(F.elu)" in held and mid:
        out["compiled"] = (x_copy("torch.compile(F.elu)", top), x_copy("torch.compile(F.elu)", mid))
    main = main if main is not None else other(p["gpu"], "study") or {}
    main_ms = {r["name"]: r["timing"]["median_ms"] for r in main.get("rows", []) if r.get("timing")}
    out["main_x"] = {c: ms / main_ms["copy_"] for c, ms in main_ms.items()} if "copy_" in main_ms else {}
    numel = main.get("problem", {}).get("numel") or 0
    cub = [n for n in sizes if "cub_transform" in held and ok(point(record, "cub_transform", n))]
    if cub and "cub_transform" in out["main_x"] and cub[0] <= numel <= cub[-1]:  # the lengths either side of numel
        out["cub"] = [(n, x_copy("cub_transform", n)) for n in (max(n for n in cub if n <= numel),
                                                                min(n for n in cub if n >= numel))]
    routes = pd.DataFrame((model if model is not None else other(p["gpu"], "model") or {}).get("host_cost", []))
    if set(MODEL_ROUTES) <= set(routes.get("route", [])):  # float32, no gradient, no autocast; median over sizes
        plain = routes[~routes["requires_grad"] & ~routes["autocast"]]
        out["like"] = plain.groupby("route")["us_per_call"].median().to_dict()
    return out


def block(record: dict, figure_paths=None, readme: Path = README) -> str:
    """The README's sizes block: where it comes from, the sweep in short, and the figures (linked from ``readme``)."""
    paths = figure_paths or [figure_path(record["provenance"]["gpu"], f"sizes-{name}") for name in FIGURES]
    figures = [(Path(p).stem, readme_link(p, readme)) for p in paths]
    return text.render("sizes/readme.md.j2", figures=figures, **numbers(record))
