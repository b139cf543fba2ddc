"""Notebook 09's view of the sweep: the predictions graded in one table, their inputs beside what was measured,
the figures, one table per entry with the numbers the text refers to, and the findings in short bullets (each a
cell's value or printout). The full sweep is ``table(record)``, one call away. No GPU needed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from elu_study.core.record import RecordError, load
from elu_study.core.tables import markdown
from elu_study.jobs.sizes.analysis import FORMATS, custom, frame, host_median_us, names, ok, point, small_sizes, us
from elu_study.jobs.sizes.figures import figures
from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT, STREAMS, fmt_bytes, fmt_n

ALLOCATES = ("F.elu", "torch.compile(F.elu)")  # the entries whose timed call allocates its output


def check_inputs(record: dict, empty_kernel_us: tuple[float, float], host_us: float, l2_mib: float) -> None:
    """The predictions' inputs (written before the sweep) beside what the sweep measured for each."""
    ref = record["regimes"]["reference"]
    n0 = record["sizes"][0]
    warm = [us(record, e["name"], n0, "warm") for e in record["entries"]
            if e["name"] not in STREAMS and ok(point(record, e["name"], n0))]
    small = small_sizes(record)
    print("Inputs of the predictions (assumed) against the sweep (measured):")
    print(f"- an almost empty kernel's GPU time: assumed {empty_kernel_us[0]:g}-{empty_kernel_us[1]:g} µs; measured "
          f"{min(warm):.2f}-{max(warm):.2f} µs (warm medians of the {len(warm)} entries at {fmt_n(n0)} elements)")
    print(f"- {ref}'s host cost per call: assumed ~{host_us:g} µs; measured {host_median_us(record, ref, small):.1f} µs "
          f"(median over the launch-bound lengths {fmt_n(small[0])} to {fmt_n(small[-1])})")
    print(f"- the L2: assumed {l2_mib:g} MiB; the device reports {fmt_bytes(record['l2_bytes'])}")


QUANTITIES = {
    "launch_bound_max_n": "largest length with F.elu's host time >= its warm GPU time",
    "l2_warm_end_n": "smallest length from which F.elu's cold time is within 10 % of warm",
    "host_ratio": "host time per call / F.elu's (median, launch-bound lengths)",
    "x_copy_top": "cold GPU time / copy_'s, at the largest length",
}


def measured(record: dict, quantity: str, entry: str | None = None) -> float | None:
    """One number of the sweep that a prediction is about (see QUANTITIES)."""
    reg = record["regimes"]
    if quantity == "launch_bound_max_n":
        return reg["launch_bound_max_n"]
    if quantity == "l2_warm_end_n":
        fit = reg["l2_fit_max_n"] or 0
        later = [int(n) for n, g in reg["warm_gain"].items() if int(n) > fit and g < 1.1]
        return min(later) if later else None
    if quantity == "host_ratio":
        small = small_sizes(record)
        return host_median_us(record, entry, small) / host_median_us(record, reg["reference"], small)
    if quantity == "x_copy_top":
        top = record["sizes"][-1]
        return point(record, entry, top)["cold"]["median_ms"] / point(record, "copy_", top)["cold"]["median_ms"]
    raise KeyError(f"unknown quantity {quantity!r}; one of {', '.join(QUANTITIES)}")


def graded(record: dict, predictions) -> pd.DataFrame:
    """Predictions ``(number, quantity, entry or None, (low, high))`` beside what the sweep measured: HELD where
    the value lies in the range, else MISSED and on which side."""
    rows = []
    for number, quantity, entry, (lo, hi) in predictions:
        value = measured(record, quantity, entry)
        lengths = quantity.endswith("_n")
        show = (lambda v: fmt_n(int(v))) if lengths else (lambda v: f"{v:.3g}")  # noqa: E731
        verdict = ("MISSED: no such length" if value is None else "HELD" if lo <= value <= hi else
                   f"MISSED ({'below' if value < lo else 'above'})")
        rows.append({"#": number, "entry": entry or record["regimes"]["reference"], "quantity": QUANTITIES[quantity],
                     "predicted": f"{show(lo)} to {show(hi)}",
                     "measured": "-" if value is None else fmt_n(int(value)) if lengths else f"{value:.3f}",
                     "verdict": verdict})
    return pd.DataFrame(rows).set_index("#")


def grade(record: dict, predictions, written: str):
    """The predictions graded in one table (a cell's value), when they were written stated once."""
    return Markdown(markdown(graded(record, predictions)) + f"\n\nPredictions written {written}; measured: the "
                    "record in the Data source line.")


def table(record: dict, sizes=None, entries=None, columns=None):
    """The sweep as a Markdown table (a cell's value): every entry at every length unless ``sizes``/``entries``
    say which."""
    df = frame(record, sizes, entries)
    if columns is not None:
        df = df[[c for c in ("n", "moved", *columns) if c in df.columns]]
    return Markdown(markdown(df, FORMATS))


def figure(record: dict, name: str):
    """One of the two figures, closed so that it is shown once, as the cell's value."""
    fig = figures(record, only=name)[name]
    plt.close(fig)  # shown once, as the cell's value
    return fig


# -- one row per entry, and the findings --------------------------------------------------------
def main_study(record: dict) -> tuple[dict[str, float], int | None]:
    """Each entry's time over copy_'s in the same GPU's main study (results/<gpu>.json), and its number of
    elements; ({}, None) without one."""
    try:
        main = load(record["provenance"]["gpu"], required=False)
    except RecordError:  # a record this code cannot read
        main = None
    if main is None:
        return {}, None
    return ({r["name"]: r["x_copy"] for r in main.get("rows", []) if r.get("x_copy") is not None},
            main.get("problem", {}).get("numel"))


def spread(record: dict, entry: str, n: int, mode: str) -> str:
    """A median and its p10-p90 range, µs: "3.94 (3.70-4.10)"."""
    p = point(record, entry, n)
    if not ok(p):
        return "failed"
    t = p[mode]
    return f"{1e3 * t['median_ms']:.2f} ({1e3 * t['p10_ms']:.2f}-{1e3 * t['p90_ms']:.2f})"


def x_copy(record: dict, entry: str, n: int) -> float:
    """An entry's cold median over copy_'s at length n."""
    return us(record, entry, n, "cold") / us(record, "copy_", n, "cold")


def paced_wins(record: dict, entry: str) -> int:
    """Launch-bound lengths at which the larger of the entry's host and warm GPU times is below F.elu's (a model of
    a loop of small calls: each call costs at least the larger of the two)."""
    ref = record["regimes"]["reference"]
    paced = lambda c, n: max(us(record, c, n, "host"), us(record, c, n, "warm"))  # noqa: E731
    return sum(paced(entry, n) < paced(record["regimes"]["reference"], n) for n in small_sizes(record)
               if ok(point(record, entry, n)) and ok(point(record, ref, n)))


def entry_table(record: dict) -> pd.DataFrame:
    """One row per entry (the two stream halves aside), sorted by cold time over copy_'s at the largest length:
    host cost, warm GPU time at the smallest length and at the L2's edge (median, p10-p90), the loop model's wins
    against F.elu, the largest length's x copy_ (and the main study's), and host growth at the largest length."""
    sizes, reg, small = record["sizes"], record["regimes"], small_sizes(record)
    n0, fit, top = sizes[0], reg["l2_fit_max_n"], sizes[-1]
    main, kernels = main_study(record)[0], set(custom(record))
    rows = []
    for name in names(record):
        if name in STREAMS:
            continue
        host = host_median_us(record, name, small)
        rows.append({
            "entry": name, "host µs": host,
            f"warm µs, {fmt_n(n0)}": spread(record, name, n0, "warm"),
            **({f"warm µs, {fmt_n(fit)} (L2)": spread(record, name, fit, "warm")} if fit in sizes else {}),
            f"loop wins of {len(small)}": str(paced_wins(record, name)) if name in kernels else "",
            f"x copy_, {fmt_n(top)}": x_copy(record, name, top) if ok(point(record, name, top)) else float("nan"),
            "x copy_, main study": main.get(name, float("nan")),
            f"host growth, {fmt_n(top)}": us(record, name, top, "host") / host,
        })
    df = pd.DataFrame(rows).set_index("entry")
    return df.sort_values(f"x copy_, {fmt_n(top)}")


def entry_markdown(record: dict) -> Markdown:
    """entry_table as a cell's value."""
    top = fmt_n(record["sizes"][-1])
    return Markdown(markdown(entry_table(record), {"host µs": "{:.1f}", f"x copy_, {top}": "{:.3f}",
                                                   "x copy_, main study": "{:.3f}", f"host growth, {top}": "{:.2f}x"}))


def regime_lines(record: dict) -> list[str]:
    """Where F.elu is launch-bound, and what the L2 gains where x and y fit and from four times its size on."""
    reg, sizes = record["regimes"], record["sizes"]
    ref, lb, fit, gain = reg["reference"], reg["launch_bound_max_n"], reg["l2_fit_max_n"], reg["warm_gain"]
    lines = []
    if lb is not None:
        lines.append(f"- **Launch-bound up to {fmt_n(lb)} elements** ({fmt_bytes(BYTES_PER_ELEMENT * lb)} moved): there "
                     f"{ref}'s host time per call, {host_median_us(record, ref, small_sizes(record)):.1f} µs, is at "
                     "least its warm GPU time. A Python loop of such calls is paced by the CPU.")
    if fit is not None and str(fit) in gain:
        beyond = [n for n in sizes if BYTES_PER_ELEMENT * n >= 4 * record["l2_bytes"] and str(n) in gain]
        lines.append(f"- **The L2** ({fmt_bytes(record['l2_bytes'])}) holds x and y up to {fmt_n(fit)} elements: there "
                     f"{ref}'s cold time is {gain[str(fit)]:.2f}x its warm time.")
        if beyond:
            lines.append(f"- From {fmt_n(beyond[0])} elements ({fmt_bytes(BYTES_PER_ELEMENT * beyond[0])}) on, cold is "
                         f"at most {max(gain[str(n)] for n in beyond):.3f}x warm, down to "
                         f"{gain[str(beyond[-1])]:.3f}x at {fmt_n(beyond[-1])}.")
    return lines


def kernel_lines(record: dict) -> list[str]:
    """The host cost against F.elu's, the loop model, and an odd length's second launch."""
    ref, small, held = record["regimes"]["reference"], small_sizes(record), names(record)
    h_ref = host_median_us(record, ref, small)
    kernels = [c for c in custom(record) if c in held]
    dearer = [c for c in kernels if host_median_us(record, c, small) >= h_ref]
    cheaper = [c for c in kernels if c not in dearer]
    word, others = ("less", dearer) if len(dearer) <= len(cheaper) else ("more", cheaper)
    lines = [f"- **Host cost:** per call, every custom kernel costs the host {word} than {ref}"
             + (f" except {', '.join(f'`{c}`' for c in others)}" if others else "") + " (first column), but not like "
             f"for like: custom kernels write into a preallocated `out=`, {' and '.join(ALLOCATES)} allocate.",
             *model_host_line(record, ref),
             "- The steps and CUB go through the pybind11 binding, Triton through its Python launcher.",
             f"- **A loop of small calls** costs each call at least the larger of its host and warm GPU times (a "
             f"model). \"loop wins\" counts the {len(small)} launch-bound lengths where that is below {ref}'s."]
    if 4096 in record["sizes"] and 4097 in record["sizes"] and "2_float4" in held:
        lines.append(f"- **An odd length** costs the float4 steps a second, scalar launch for the n % 4 tail: `2_float4` "
                     f"takes {us(record, '2_float4', 4097, 'warm'):.2f} µs warm at 4,097 elements against "
                     f"{us(record, '2_float4', 4096, 'warm'):.2f} at 4,096. CUB and Triton handle the tail in their "
                     "one kernel.")
    return lines


MODEL_ROUTES = ("binding", "F.elu", "elu_study.ELU")  # notebook 11's host routes, each call allocating


def model_host_line(record: dict, ref: str) -> list[str]:
    """The like-for-like host cost from notebook 11's record (results/<gpu>-model.json, ``host_cost``), where every
    route allocates its output: medians over its sizes (float32, no gradient) of each route's µs per call."""
    try:
        model = load(record["provenance"]["gpu"], "model", required=False)
    except RecordError:  # a record this code cannot read
        model = None
    rows = pd.DataFrame((model or {}).get("host_cost", []))
    if ref != "F.elu" or rows.empty or not set(MODEL_ROUTES) <= set(rows["route"]):
        return []
    plain = rows[~rows["requires_grad"] & ~rows["autocast"]]
    binding, felu, drop_in = (float(plain[plain["route"] == r]["us_per_call"].median()) for r in MODEL_ROUTES)
    return [f"- **Like for like** ([notebook 11](11_in_a_model.ipynb)'s record, every call allocating): the binding "
            f"alone takes {binding:.2f} µs per call, {binding / felu:.2f}x F.elu's {felu:.2f} µs. The drop-in "
            f"`elu_study.ELU` takes {drop_in / felu:.2f}x F.elu's."]


def top_lines(record: dict) -> list[str]:
    """The largest length: F.elu and the floor over copy_, host growth, and the two gaps labelled hypotheses."""
    sizes, ref = record["sizes"], record["regimes"]["reference"]
    top, held, (main, numel) = sizes[-1], names(record), main_study(record)
    powers = [n for n in sizes if n < top and n & (n - 1) == 0]
    stream = record["floors"][str(top)]["stream_cold_ms"]
    lines = [f"- **At {fmt_n(top)} elements** ({fmt_bytes(BYTES_PER_ELEMENT * top)}) {ref} takes "
             f"{x_copy(record, ref, top):.3f}x copy_'s time"
             + (f"; the measured floor (read_only + write_only) is {1e3 * stream / us(record, 'copy_', top, 'cold'):.3f}x."
                if stream else ".")]
    if ok(point(record, ref, top)):
        grow = us(record, ref, top, "host") / host_median_us(record, ref, small_sizes(record))
        lines.append(f"- **Host time grows at {fmt_n(top)}:** {ref}'s is {grow:.2f}x its launch-bound median. "
                     f"HYPOTHESIS, not profiled: part is the caching allocator ({', '.join(ALLOCATES)} allocate "
                     "their output); calls that allocate nothing grow too.")
    cub = [n for n in sizes if ok(point(record, "cub_transform", n))] if "cub_transform" in held else []
    if cub and "cub_transform" in main and numel and cub[0] <= numel <= cub[-1]:
        below, above = max(n for n in cub if n <= numel), min(n for n in cub if n >= numel)
        lines.append(f"- `cub_transform` takes {x_copy(record, 'cub_transform', below):.3f}x copy_ at {fmt_n(below)} "
                     f"and {x_copy(record, 'cub_transform', above):.3f}x at {fmt_n(above)}, on either side of the main "
                     f"study's length, against {main['cub_transform']:.3f}x there. HYPOTHESIS: CUB picks another "
                     "kernel for 1-D buffers, or the two timing methods differ.")
    tc = "torch.compile(F.elu)"
    if tc in held and powers and ok(point(record, tc, top)) and ok(point(record, tc, powers[-1])):
        lines.append(f"- `{tc}` takes {x_copy(record, tc, top):.3f}x copy_ at {fmt_n(top)} against "
                     f"{x_copy(record, tc, powers[-1]):.3f}x at {fmt_n(powers[-1])}. HYPOTHESIS: past 32-bit indices "
                     "Inductor's kernel uses 64-bit index arithmetic.")
    return lines


def findings(record: dict) -> Markdown:
    """The sweep's findings, one idea per bullet, every number from the record (a cell's value)."""
    return Markdown("\n".join([*regime_lines(record), *kernel_lines(record), *top_lines(record)]))
