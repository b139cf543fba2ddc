"""The sweep's record read back (points, series) and the numbers derived from it (floors, regimes). No GPU needed."""

import numpy as np

from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT, STREAMS

REFERENCE = "F.elu"  # the entry whose regimes the record keeps


def ok(p: dict) -> bool:
    """Whether a point ran (it has timings, not an error)."""
    return "error" not in p and "cold" in p


def series(record: dict, entry: str, mode: str, q: str = "median_ms") -> tuple[np.ndarray, np.ndarray]:
    """(lengths, values) of one entry in one mode, lengths ascending, failed points left out."""
    pts = sorted((p for p in record["points"] if p["entry"] == entry and ok(p)), key=lambda p: p["n"])
    return np.array([p["n"] for p in pts], dtype=np.float64), np.array([p[mode][q] for p in pts])


def stream_bound_from(record: dict, mode: str) -> int | None:
    """The least length from which the stream halves' sum (``floors``) bounds every timed row in ``mode`` (cold or
    warm): at it and every longer length the sum is there (both halves ran) and no row that ran has its median under
    it. None where the longest length fails that. Shorter, the sum pays two launches and bounds nothing."""
    floor = {n: record["floors"][str(n)][f"stream_{mode}_ms"] for n in record["sizes"]}
    under = {p["n"] for p in record["points"] if ok(p) and p["entry"] not in STREAMS and floor[p["n"]] is not None
             and p[mode]["median_ms"] < floor[p["n"]]}
    bound = None
    for n in sorted(record["sizes"], reverse=True):
        if n in under or floor[n] is None:
            break
        bound = n
    return bound


def derive(record: dict) -> dict:
    """The record with its floors per length (the datasheet's; the stream halves' sum, None unless both ran) and its
    regimes on REFERENCE: launch_bound_max_n, the largest length at which its host time per call is at least its
    warm GPU time (a loop of such calls is paced by the CPU); l2_fit_max_n, the largest length whose 8 bytes per
    element fit in the L2; warm_gain, cold over warm median time per length."""
    peak = record.get("peak_bytes_per_s")
    record["floors"] = {}
    for n in record["sizes"]:
        halves = [p for p in record["points"] if p["entry"] in STREAMS and p["n"] == n and ok(p)]
        record["floors"][str(n)] = {
            "datasheet_ms": BYTES_PER_ELEMENT * n / peak * 1e3 if peak else None,
            **{f"stream_{m}_ms": sum(h[m]["median_ms"] for h in halves) if len(halves) == len(STREAMS) else None
               for m in ("cold", "warm")}}
    fit = max((n for n in record["sizes"] if BYTES_PER_ELEMENT * n <= (record.get("l2_bytes") or 0)), default=None)
    pts = [p for p in record["points"] if p["entry"] == REFERENCE and ok(p)]
    bound = [p["n"] for p in pts if p["host"]["median_ms"] >= p["warm"]["median_ms"]]
    record["regimes"] = {"reference": REFERENCE, "launch_bound_max_n": max(bound, default=None), "l2_fit_max_n": fit,
                         "warm_gain": {str(p["n"]): p["cold"]["median_ms"] / p["warm"]["median_ms"] for p in pts}}
    return record
