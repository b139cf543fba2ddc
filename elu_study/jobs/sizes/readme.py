"""The sweep in words: every number from the record, for the README's sizes block and notebook 09.

Measured facts are stated as such; the explanations nobody measured are labelled HYPOTHESIS.
"""

from __future__ import annotations

from pathlib import Path

from elu_study.core.record import figure_path, load, readme_link, record_path, slug
from elu_study.core.paths import README
from elu_study.jobs.sizes.analysis import (custom, host_median_us, names, ok, point, small_sizes, spread_us, us,
                                           versus)
from elu_study.jobs.sizes.figures import FIGURES
from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT, STREAMS, fmt_bytes, fmt_n

# Entries whose timed call allocates its output (harness.timed_call): F.elu as the model calls it, and torch.compile's.
ALLOCATES = ("F.elu", "torch.compile(F.elu)")


def header_line(record: dict) -> str:
    """Where, when and what was measured, and how many checks pass."""
    p = record["provenance"]
    sizes = record["sizes"]
    checked = [q for q in record["points"] if q.get("check") is not None]
    good = sum(q["check"]["passed"] for q in checked)
    return (
        f"Measured on an {p['gpu']} by `python -m elu_study sizes` ({p['date_utc'][:10]}, commit {p.get('commit')}): "
        f"{len(names(record))} entries at {len(sizes)} lengths from {fmt_n(sizes[0])} to {fmt_n(sizes[-1])} elements "
        f"({fmt_bytes(BYTES_PER_ELEMENT * sizes[0])} to {fmt_bytes(BYTES_PER_ELEMENT * sizes[-1])} moved); every output "
        f"NaN-poisoned and compared element by element with F.elu: {good} of {len(checked)} checks pass"
        + (f"; {len(record['errors'])} points failed to run: {'; '.join(record['errors'][:3])}" if record["errors"] else "")
        + ". GPU times are CUDA-event medians (cold: L2 flushed before each call; warm: back to back); host time "
        "is the wall-clock of the Python call with the GPU held busy, so that no call waits for the GPU: the CPU-side "
        "cost of the call (it grows at the largest lengths, see below).")


def launch_bound_line(record: dict) -> str:
    """Up to which length the reference's host time per call is at least its warm GPU time."""
    ref, lb = record["regimes"]["reference"], record["regimes"]["launch_bound_max_n"]
    h_ref = host_median_us(record, ref, small_sizes(record))
    if lb is None:
        return (f"- **Never launch-bound:** {ref}'s warm GPU time exceeds its host time ({h_ref:.1f} µs) "
                f"even at {fmt_n(record['sizes'][0])} elements.")
    return (
        f"- **Launch-bound up to {fmt_n(lb)} elements ({fmt_bytes(BYTES_PER_ELEMENT * lb)} moved).** There {ref}'s "
        f"host time per call (median {h_ref:.1f} µs) is at least its warm GPU time "
        f"({us(record, ref, lb, 'warm'):.1f} µs at {fmt_n(lb)}): a Python loop of such calls is paced by the CPU, "
        "not the GPU.")


def host_cost_line(record: dict) -> str:
    """Every custom kernel's host cost per call over the launch-bound lengths, cheaper or dearer than F.elu's."""
    held, ref, small = names(record), record["regimes"]["reference"], small_sizes(record)
    h_ref = host_median_us(record, ref, small)
    kernels = [c for c in custom(record) if c in held]
    host = {c: host_median_us(record, c, small) for c in kernels}
    cheaper = [c for c in kernels if host[c] < h_ref]
    dearer = [c for c in kernels if host[c] >= h_ref]
    fmt = lambda cs: ", ".join(f"`{c}` {host[c]:.1f}" for c in cs) or "none"  # noqa: E731
    return (
        f"- **Host cost per call, median over the launch-bound lengths** ({fmt_n(small[0])} to {fmt_n(small[-1])}; "
        f"µs; {ref} {h_ref:.1f}"
        + (f", F.elu_ {host_median_us(record, 'F.elu_', small):.1f}" if "F.elu_" in held else "")
        + (f", torch.compile {host_median_us(record, 'torch.compile(F.elu)', small):.1f}"
           if "torch.compile(F.elu)" in held else "")
        + f"): cheaper than {ref}: {fmt(cheaper)}; dearer: {fmt(dearer)}. The steps and CUB go through the pybind11 "
        "binding (its checks, a device guard, the launch); F.elu through ATen's dispatcher; Triton through its "
        "Python launcher and autotuner. Which part of each dominates is a hypothesis: it was not profiled.")


def loop_line(record: dict) -> str:
    """At how many launch-bound lengths each custom kernel's larger-of host and warm time is below F.elu's."""
    ref, small = record["regimes"]["reference"], small_sizes(record)
    kernels = [c for c in custom(record) if c in names(record)]
    paced = lambda c, n: max(us(record, c, n, "host"), us(record, c, n, "warm"))  # noqa: E731
    wins = {c: sum(paced(c, n) < paced(ref, n) for n in small if ok(point(record, c, n))) for c in kernels}
    return (
        f"- **In a loop of small calls** ({fmt_n(small[0])} to {fmt_n(small[-1])}, {len(small)} lengths) a call costs "
        f"at least the larger of its host and warm GPU times (both measured; the larger-of is a model). Lengths at "
        f"which that is below {ref}'s: " + ", ".join(f"`{c}` {wins[c]}" for c in kernels) + ".")


def gpu_time_lines(record: dict) -> list[str]:
    """Warm GPU times at the smallest length and in the L2, an odd length's tail, and what the L2 gains."""
    held, sizes, reg = names(record), record["sizes"], record["regimes"]
    ref, n0, fit = reg["reference"], sizes[0], reg["l2_fit_max_n"]
    kernels = [c for c in custom(record) if c in held]
    h_ref = host_median_us(record, ref, small_sizes(record))
    lines = [
        f"- **GPU time at {fmt_n(n0)} elements, warm** (µs; {ref} {us(record, ref, n0, 'warm'):.2f}, cold "
        f"{us(record, ref, n0, 'cold'):.2f}): {versus(record, kernels, n0, 'warm')}. The spread between the custom "
        f"kernels is {spread_us(record, kernels, n0, 'warm'):.2f} µs, against {ref}'s host cost of {h_ref:.1f} µs per call."]
    if fit is not None and fit != n0 and fit in sizes:
        lines.append(
            f"- **In the L2, at {fmt_n(fit)} elements, warm** (µs; {ref} {us(record, ref, fit, 'warm'):.2f}): "
            f"{versus(record, kernels, fit, 'warm')}.")
    if 4096 in sizes and 4097 in sizes:
        pairs = [c for c in ("2_float4", "cub_transform", "triton", ref) if c in held
                 and ok(point(record, c, 4096)) and ok(point(record, c, 4097))]
        lines.append(
            "- **An odd length** (4,097 against 2^12, warm µs): "
            + ", ".join(f"`{c}` {us(record, c, 4097, 'warm'):.2f} vs {us(record, c, 4096, 'warm'):.2f}" for c in pairs)
            + ". The float4 steps send the n % 4 tail to a second, scalar launch (kernels/common/elu.cuh); "
            "CUB and Triton handle it inside their one kernel.")
    lines += l2_lines(record)
    return lines


def l2_lines(record: dict) -> list[str]:
    """What the L2 gains: the reference's cold over warm time where x and y fit, and at most how much from four
    times the L2 on (with the value at the first and the last such length)."""
    reg, sizes = record["regimes"], record["sizes"]
    ref, fit, gain = reg["reference"], reg["l2_fit_max_n"], reg["warm_gain"]
    if fit is None or str(fit) not in gain:
        return []
    beyond = [n for n in sizes if BYTES_PER_ELEMENT * n >= 4 * record["l2_bytes"] and str(n) in gain]
    tail = "."
    if beyond:
        top = max(gain[str(n)] for n in beyond)
        tail = (f"; from {fmt_n(beyond[0])} ({fmt_bytes(BYTES_PER_ELEMENT * beyond[0])}) on, at most {top:.3f}x "
                f"({gain[str(beyond[0])]:.3f}x at {fmt_n(beyond[0])}, {gain[str(beyond[-1])]:.3f}x at {fmt_n(beyond[-1])}).")
    return [f"- **The L2** ({fmt_bytes(record['l2_bytes'])}) holds x and y up to {fmt_n(fit)} elements: there {ref}'s "
            f"cold time is {gain[str(fit)]:.2f}x its warm time" + tail]


def summary_lines(record: dict, main: dict | None = None) -> list[str]:
    """The sweep in words, every number from the record (and, for one comparison, the main study's record ``main``,
    by default results/<gpu>.json where it exists): the README block and notebook 09 print these."""
    lines = [header_line(record)]
    if record["regimes"]["reference"] not in names(record):
        return lines
    lines += [launch_bound_line(record), host_cost_line(record), loop_line(record), *gpu_time_lines(record)]
    lines.extend(host_growth_lines(record))
    lines.extend(top_lines(record, main))
    return lines


def host_growth_lines(record: dict) -> list[str]:
    """Host time at the largest length against the launch-bound median, every entry (measured), and a hypothesis."""
    held = names(record)
    top, small = record["sizes"][-1], small_sizes(record)
    if top in small:
        return []
    base = {c: host_median_us(record, c, small) for c in held}
    at = {c: us(record, c, top, "host") for c in held if ok(point(record, c, top))}
    grown = sorted(at, key=lambda c: -at[c] / base[c])
    prev = [n for n in record["sizes"] if n < top and n & (n - 1) == 0]
    mid = prev[-1] if prev else None
    fmt = lambda c: (f"`{c}` {base[c]:.1f} -> " + (f"{us(record, c, mid, 'host'):.1f} at {fmt_n(mid)}, " if mid else "")  # noqa: E731
                     + f"{at[c]:.1f} ({at[c] / base[c]:.2f}x)")
    alloc = [c for c in ALLOCATES if c in at]
    return [
        f"- **Host time grows at the largest lengths** (µs per call, median over the launch-bound lengths -> at "
        f"{fmt_n(top)} elements, sorted by growth): " + ", ".join(fmt(c) for c in grown) + ". "
        "HYPOTHESIS, not measured: for the calls that allocate their output (" + ", ".join(f"`{c}`" for c in alloc)
        + f"; the others write into a preallocated y or in place) part of it is the caching allocator handing out "
        f"{fmt_bytes(4 * top)} per call; calls that allocate nothing grow too, so that is not all of it (not profiled)."]


def main_x_copy(record: dict, main: dict | None) -> tuple[dict, str, int | None]:
    """Each entry's cold time over copy_'s in the main study's record (results/<gpu>.json), a label for it, and its
    number of elements; the main study's record is read (job "study") when ``main`` is None."""
    if main is None:
        try:
            main = load(record["provenance"]["gpu"], required=False)
        except (KeyError, ValueError):  # a record this code cannot read (RecordError is a ValueError)
            main = None
        if main is None:
            return {}, "", None
    prob = main.get("problem", {})
    shape = "x".join(str(d) for d in prob.get("shape", []))
    label = (f"main study (`results/{slug(main['provenance']['gpu'])}.json`, ({shape}), "
             f"{prob.get('numel', 0):,} elements, commit {main['provenance'].get('commit')})")
    return ({r["name"]: r["x_copy"] for r in main.get("rows", []) if r.get("x_copy") is not None}, label,
            prob.get("numel"))


def ratio(record: dict, entry: str, n: int) -> float:
    """An entry's cold median over copy_'s at length n."""
    return us(record, entry, n, "cold") / us(record, "copy_", n, "cold")


def top_lines(record: dict, main: dict | None = None) -> list[str]:
    """Every entry's cold time over copy_'s at the two largest powers of two, beside the main study's, and what
    differs (measured), with the explanations labelled hypotheses."""
    held, sizes = names(record), record["sizes"]
    top = sizes[-1]
    if "copy_" not in held or not ok(point(record, "copy_", top)):
        return []
    powers = [n for n in sizes if n < top and n & (n - 1) == 0]
    mid = powers[-1] if powers else None
    roof = us(record, "copy_", top, "cold")
    stream = record["floors"][str(top)]["stream_cold_ms"]
    big = [c for c in held if c not in STREAMS and c != "copy_" and ok(point(record, c, top))]
    ref_main, label, main_numel = main_x_copy(record, main)
    show = lambda c: (f"`{c}` {ratio(record, c, top):.3f}"  # noqa: E731
                      + (f" ({fmt_n(mid)}: {ratio(record, c, mid):.3f}" if mid and ok(point(record, c, mid)) else " (")
                      + (f"; main study: {ref_main[c]:.3f})" if c in ref_main else ")"))
    lines = [
        f"- **At {fmt_n(top)} elements** ({fmt_bytes(BYTES_PER_ELEMENT * top)}), cold, x copy_'s {roof / 1e3:.3f} ms "
        f"(in brackets: at {fmt_n(mid) if mid else '-'}, and in the {label or 'main study (no record)'}), every entry: "
        + ", ".join(show(c) for c in big)
        + (f"; the measured floor (read_only + write_only) is {1e3 * stream / roof:.3f}x." if stream else ".")]
    lines += [f"- {note}." for note in top_notes(record, big, mid, ref_main, main_numel)]
    return lines


def top_notes(record: dict, big: list[str], mid: int | None, ref_main: dict, main_numel: int | None) -> list[str]:
    """What differs at the largest length, each explanation labelled a hypothesis: CUB against the main study,
    torch.compile past 32-bit indices."""
    sizes, top = record["sizes"], record["sizes"][-1]
    notes = []
    if "cub_transform" in big and "cub_transform" in ref_main:
        numel = (main_numel or 0)
        below = [n for n in sizes if n <= numel and ok(point(record, "cub_transform", n))]
        above = [n for n in sizes if n >= numel and ok(point(record, "cub_transform", n))]
        around = (f"; the lengths on either side of the main study's give {ratio(record, 'cub_transform', below[-1]):.3f}x "
                  f"and {ratio(record, 'cub_transform', above[0]):.3f}x" if below and above else "")
        notes.append(
            f"`cub_transform` takes {ratio(record, 'cub_transform', top):.3f}x copy_ at {fmt_n(top)} but "
            f"{ref_main['cub_transform']:.3f}x in the main study{around}. HYPOTHESIS, not measured: CUB picks another "
            "kernel for these 1-D buffers than for the main study's tensor, or the two timing methods differ")
    if "torch.compile(F.elu)" in big and mid and ok(point(record, "torch.compile(F.elu)", mid)):
        notes.append(
            f"`torch.compile(F.elu)` takes {ratio(record, 'torch.compile(F.elu)', top):.3f}x copy_ at {fmt_n(top)} against "
            f"{ratio(record, 'torch.compile(F.elu)', mid):.3f}x at {fmt_n(mid)}. HYPOTHESIS, not measured: {fmt_n(top)} "
            "elements do not fit 32-bit indices, so Inductor's kernel switches to 64-bit index arithmetic")
    return notes


def readme_header(record: dict) -> str:
    """Where the README's sizes block comes from, in two short sentences."""
    p, sizes = record["provenance"], record["sizes"]
    checked = [q for q in record["points"] if q.get("check") is not None]
    good = sum(q["check"]["passed"] for q in checked)
    failed = f" {len(record['errors'])} points failed to run." if record["errors"] else ""
    return (f"**Across sizes.** From `results/{record_path(p['gpu'], 'sizes').name}`, measured on an {p['gpu']} at "
            f"commit {p.get('commit')} ({p['date_utc'][:10]}): {len(names(record))} entries at {len(sizes)} lengths, "
            f"{fmt_n(sizes[0])} to {fmt_n(sizes[-1])} elements. {good} of {len(checked)} element-by-element checks "
            f"pass.{failed} [09_sizes](notebooks/09_sizes.ipynb) gives every number.")


def growth_line(record: dict) -> list[str]:
    """Host time per call at the largest length against the launch-bound median: the reference's growth, the
    custom kernels' largest, and the hypothesis (a short form of host_growth_lines)."""
    ref, top, small = record["regimes"]["reference"], record["sizes"][-1], small_sizes(record)
    if top in small or not ok(point(record, ref, top)):
        return []
    grow = lambda c: us(record, c, top, "host") / host_median_us(record, c, small)  # noqa: E731
    kernels = [c for c in custom(record) if c in names(record) and ok(point(record, c, top))]
    most = max(kernels, key=grow) if kernels else None
    return [f"- **Host time per call grows:** {ref}'s is {us(record, ref, top, 'host'):.1f} µs at {fmt_n(top)} elements, "
            f"{grow(ref):.2f}x its launch-bound median"
            + (f"; the custom kernels' grows at most {grow(most):.2f}x (`{most}`)" if most else "")
            + f". HYPOTHESIS, not measured: part of it is the caching allocator handing {ref} {fmt_bytes(4 * top)} per "
            "call; calls that allocate nothing grow too."]


def readme_lines(record: dict) -> list[str]:
    """The README's short form of the sweep: where it comes from, what the L2 gains, how host time grows. The
    first screen states the launch-bound regime; notebook 09 prints ``summary_lines``, every number."""
    lines = [readme_header(record), ""]
    if record["regimes"]["reference"] not in names(record):
        return lines
    return lines + l2_lines(record) + growth_line(record)


def block(record: dict, figure_paths=None, readme: Path = README) -> str:
    """The README's sizes block: where it comes from, the sweep in short, and the figures (linked from ``readme``)."""
    gpu = record["provenance"]["gpu"]
    paths = figure_paths or [figure_path(gpu, f"sizes-{name}") for name in FIGURES]
    body = [*readme_lines(record), "", *(f"![{Path(p).stem}]({readme_link(p, readme)})" for p in paths)]
    return "\n".join(body)
