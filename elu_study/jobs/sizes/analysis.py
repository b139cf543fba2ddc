"""The sweep's record read back: points and series, the derived floors and regimes. No GPU needed."""

from __future__ import annotations

import numpy as np

from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT, STREAMS


def ok(p: dict) -> bool:
    """Whether a point ran (it has timings, not an error)."""
    return "error" not in p and "cold" in p


def point(record: dict, entry: str, n: int) -> dict:
    """An entry's point at length n."""
    for p in record["points"]:
        if p["entry"] == entry and p["n"] == n:
            return p
    raise KeyError(f"no point for {entry!r} at n={n}")


def series(record: dict, entry: str, mode: str, q: str = "median_ms") -> tuple[np.ndarray, np.ndarray]:
    """(lengths, values) of one entry in one mode, lengths ascending, failed points left out."""
    pts = sorted((p for p in record["points"] if p["entry"] == entry and ok(p)), key=lambda p: p["n"])
    return np.array([p["n"] for p in pts], dtype=np.float64), np.array([p[mode][q] for p in pts])


def derive(record: dict) -> dict:
    """Derived numbers every view uses: the floors per length, where the regimes change."""
    peak = record.get("peak_bytes_per_s")
    floors = {}
    for n in record["sizes"]:
        try:
            halves = [point(record, s, n) for s in STREAMS]
        except KeyError:
            halves = []
        whole = halves and all(map(ok, halves))
        floors[str(n)] = {"datasheet_ms": BYTES_PER_ELEMENT * n / peak * 1e3 if peak else None,
                          **{f"stream_{m}_ms": sum(h[m]["median_ms"] for h in halves) if whole else None
                             for m in ("cold", "warm")}}
    record["floors"] = floors
    record["regimes"] = regimes(record)
    return record


def regimes(record: dict, reference: str = "F.elu") -> dict:
    """Where the regimes change, on the reference entry: launch_bound_max_n, the largest length at which its host time
    per call is at least its warm GPU time (a loop of such calls is paced by the CPU); l2_fit_max_n, the largest length
    whose 8 bytes per element fit in the L2; warm_gain, cold over warm median time per length."""
    fit = max((n for n in record["sizes"] if BYTES_PER_ELEMENT * n <= (record.get("l2_bytes") or 0)), default=None)
    pts = [p for p in record["points"] if p["entry"] == reference and ok(p)]
    bound = [p["n"] for p in pts if p["host"]["median_ms"] >= p["warm"]["median_ms"]]
    return {"reference": reference, "launch_bound_max_n": max(bound, default=None), "l2_fit_max_n": fit,
            "warm_gain": {str(p["n"]): p["cold"]["median_ms"] / p["warm"]["median_ms"] for p in pts}}


def names(record: dict) -> list[str]:
    """Every entry the sweep holds, in its order."""
    return [e["name"] for e in record["entries"]]


def custom(record: dict) -> list[str]:
    """The custom kernels: steps and peers (what a user would write or reach for instead of F.elu)."""
    return [e["name"] for e in record["entries"] if e["kind"] in ("step", "peer")]


def us(record, entry, n, mode) -> float:
    """An entry's median at one length and mode, µs (NaN where the point failed to run)."""
    p = point(record, entry, n)
    return 1e3 * p[mode]["median_ms"] if ok(p) else float("nan")


def small_sizes(record: dict) -> list[int]:
    """The launch-bound lengths (up to regimes.launch_bound_max_n), or the smallest length if none is."""
    top = record["regimes"]["launch_bound_max_n"] or min(record["sizes"])
    return [n for n in record["sizes"] if n <= top]


def host_median_us(record: dict, entry: str, sizes) -> float:
    """Median over lengths of an entry's host time per call, µs."""
    values = [us(record, entry, n, "host") for n in sizes if ok(point(record, entry, n))]
    return float(np.median(values)) if values else float("nan")

