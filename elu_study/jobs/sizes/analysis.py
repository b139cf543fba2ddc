"""What the sweep's record holds, read back: points and series, the derived floors and regimes, the table,
and the comparisons the README block and the notebook quote. No GPU needed."""

from __future__ import annotations

import numpy as np
import pandas as pd

from elu_study.jobs.sizes.plan import BYTES_PER_ELEMENT, MODES, STREAMS, fmt_bytes, fmt_n

FORMATS = {"cold µs": "{:.2f}", "warm µs": "{:.2f}", "host µs": "{:.2f}", "cold TB/s": "{:.3f}", "warm TB/s": "{:.3f}"}


def ok(p: dict) -> bool:
    """Whether a point ran (it has timings, not an error)."""
    return "error" not in p and "cold" in p


def point(record: dict, entry: str, n: int) -> dict:
    for p in record["points"]:
        if p["entry"] == entry and p["n"] == n:
            return p
    raise KeyError(f"no point for {entry!r} at n={n}")


def series(record: dict, entry: str, mode: str, q: str = "median_ms") -> tuple[np.ndarray, np.ndarray]:
    """(lengths, values) of one entry in one mode, lengths ascending, failed points left out."""
    pts = sorted((p for p in record["points"] if p["entry"] == entry and ok(p)), key=lambda p: p["n"])
    return np.array([p["n"] for p in pts], dtype=np.float64), np.array([p[mode][q] for p in pts])


def derive(record: dict) -> dict:
    """Derived numbers every view uses: TB/s per point, the floors per length, where the regimes change."""
    peak = record.get("peak_bytes_per_s")
    for p in record["points"]:
        if ok(p):
            for mode in ("cold", "warm"):
                p[f"{mode}_tbps"] = p["bytes"] / (p[mode]["median_ms"] * 1e-3) / 1e12
    floors = {}
    for n in record["sizes"]:
        f = {"datasheet_ms": BYTES_PER_ELEMENT * n / peak * 1e3 if peak else None}
        for mode in ("cold", "warm"):
            try:
                halves = [point(record, s, n) for s in STREAMS]
            except KeyError:
                halves = []
            f[f"stream_{mode}_ms"] = sum(h[mode]["median_ms"] for h in halves) if halves and all(map(ok, halves)) else None
        floors[str(n)] = f
    record["floors"] = floors
    record["regimes"] = regimes(record)
    return record


def regimes(record: dict, reference: str = "F.elu") -> dict:
    """Where the regimes change, measured on the reference entry (F.elu):

    - launch_bound_max_n: the largest length at which its host time per call is at least its warm GPU time
      (a Python loop of such calls is paced by the CPU);
    - l2_fit_max_n: the largest length whose 8 bytes per element fit in the L2;
    - warm_gain: cold over warm median time per length (above 1: the L2 helped).
    """
    out = {"reference": reference, "launch_bound_max_n": None, "l2_fit_max_n": None, "warm_gain": {}}
    l2 = record.get("l2_bytes") or 0
    fits = [n for n in record["sizes"] if BYTES_PER_ELEMENT * n <= l2]
    out["l2_fit_max_n"] = max(fits) if fits else None
    pts = [p for p in record["points"] if p["entry"] == reference and ok(p)]
    bound = [p["n"] for p in pts if p["host"]["median_ms"] >= p["warm"]["median_ms"]]
    out["launch_bound_max_n"] = max(bound) if bound else None
    out["warm_gain"] = {str(p["n"]): p["cold"]["median_ms"] / p["warm"]["median_ms"] for p in pts}
    return out


def frame(record: dict, sizes=None, entries=None) -> pd.DataFrame:
    """One line per (entry, length): µs cold, warm and on the host (median, p10-p90), TB/s, verdict."""
    rows = []
    for p in record["points"]:
        if (sizes is not None and p["n"] not in sizes) or (entries is not None and p["entry"] not in entries):
            continue
        c = p.get("check")
        row = {"entry": p["entry"], "n": fmt_n(p["n"]), "moved": fmt_bytes(p["bytes"]),
               "correct": "n/a" if c is None else ("yes" if c["passed"] else "NO")}
        if ok(p):
            for mode in MODES:
                row[f"{mode} µs"] = 1e3 * p[mode]["median_ms"]
                row[f"{mode} p10-p90 µs"] = f"{1e3 * p[mode]['p10_ms']:.2f}-{1e3 * p[mode]['p90_ms']:.2f}"
            row["cold TB/s"], row["warm TB/s"] = p["cold_tbps"], p["warm_tbps"]
        else:
            row["error"] = p.get("error")
        rows.append(row)
    return pd.DataFrame(rows).set_index("entry")


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


def classify(record: dict, entry: str, n: int, mode: str) -> str:
    """"faster" or "slower" than the reference (F.elu) only where the p10-p90 ranges do not overlap, else "within"."""
    a, b = point(record, entry, n)[mode], point(record, record["regimes"]["reference"], n)[mode]
    if a["p90_ms"] < b["p10_ms"]:
        return "faster"
    if a["p10_ms"] > b["p90_ms"]:
        return "slower"
    return "within"


def versus(record: dict, entries, n: int, mode: str) -> str:
    """Faster / within the spread of / slower than F.elu at one length and mode (p10-p90 ranges compared), each
    entry with its median and its median over F.elu's."""
    ref = record["regimes"]["reference"]
    base = us(record, ref, n, mode)
    t = {c: us(record, c, n, mode) for c in entries if ok(point(record, c, n))}
    kind = {c: classify(record, c, n, mode) for c in t}
    fmt = lambda k: ", ".join(f"`{c}` {t[c]:.2f} ({t[c] / base:.2f}x)" for c in sorted(t, key=t.get)  # noqa: E731
                              if kind[c] == k) or "none"
    return (f"faster than {ref} (p10-p90 ranges apart): {fmt('faster')}; within the spread of {ref} (ranges overlap): "
            f"{fmt('within')}; slower: {fmt('slower')}")


def spread_us(record: dict, entries, n: int, mode: str) -> float:
    """The largest minus the smallest median of these entries at one length and mode, µs."""
    t = [us(record, c, n, mode) for c in entries if ok(point(record, c, n))]
    return max(t) - min(t) if t else float("nan")
