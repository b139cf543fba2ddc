"""Step 6's experiments: can a kernel beat copy_, and the sure way past it (fewer bytes).

``python -m elu_study beyond`` (GPU, ncu): builds every attempt of ``study.ATTEMPTS`` (each one
knob of ``kernels/6_beyond_copy.cu`` changed from ``6_base``), checks them, and times them in the
same interleaved rounds as copy_, the two halves of a stream (read_only, write_only), step 2,
step 2 with 128-thread blocks and step 6 itself; then reads each attempt's DRAM counters with
Nsight Compute; then checks the 16-bit storage path on every one of the 65,536 bit patterns of
float16 and bfloat16 against F.elu in that dtype; then times step 6 against copy_ again in
``--processes`` fresh processes, since a margin of a percent must survive a new process to count.
Everything goes to results/<gpu>-beyond.json and its figures; notebook 08 reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# The rows every attempt is compared with, timed in the same rounds.
COMPARED = ("copy_", "read_only", "write_only", "2_float4", "2+128_threads", "5_streaming", "F.elu", "6_beyond_copy")
# What each fresh process times (the claim, its control and the roof).
REPEATED = ("copy_", "2_float4", "2+128_threads", "6_beyond_copy")
SUFFIX = "-beyond.json"
DTYPES16 = ("bfloat16", "float16")
ALPHAS16 = (1.0, 1.5, 0.0, -0.7)


def record_path(gpu: str) -> Path:
    from .hardware import slug
    from .results import RESULTS_DIR

    return RESULTS_DIR / f"{slug(gpu)}{SUFFIX}"


def load(gpu: str | None = None) -> dict | None:
    from .results import REFERENCE_GPU

    path = record_path(gpu or REFERENCE_GPU)
    return json.loads(path.read_text()) if path.exists() else None


def entries():
    from .study import ATTEMPTS, ENTRIES

    return [ENTRIES[n] for n in COMPARED] + list(ATTEMPTS)


def kernel_names() -> list[str]:
    """The entries ncu can see (copy_ of either dtype is a driver copy, not a kernel)."""
    return [e.name for e in entries() if not e.name.startswith("copy_")]


def formula(entry, knob: str = "OP") -> str:
    """The ELU formula a build of kernels/6_beyond_copy.cu uses for float32 (knob "OP") or 16-bit storage
    ("OP16"): its -DELU6_<knob> flag, else the file's default."""
    import re

    from .build import resolve_variant

    for flag in entry.flags:
        if flag.startswith(f"-DELU6_{knob}="):
            return flag.split("=", 1)[1]
    return re.search(rf"#define ELU6_{knob} (\w+)", resolve_variant(entry.variant).read_text()).group(1)


# -- 16-bit storage: every bit pattern -------------------------------------------------------------


def _ordered(t):
    """A 16-bit float's bits as an integer that orders like the values (for ulp distances)."""
    import torch

    i = t.view(torch.int16).to(torch.int32)
    return torch.where(i < 0, -32768 - i, i)


def check_16bit(module, dtype_name: str, alphas=ALPHAS16, expect_identical: bool = True) -> dict:
    """Every one of the 65,536 inputs of a 16-bit dtype through ``module.elu``, against F.elu in that dtype.

    The output is poisoned first (a NaN pattern F.elu never returns for a number). Also a random
    tensor of an odd length at a misaligned offset, so the scalar path and the tail are compared too.
    """
    import torch
    import torch.nn.functional as F

    dtype = getattr(torch, dtype_name)
    bits = torch.arange(-32768, 32768, dtype=torch.int32, device="cuda").to(torch.int16)
    x = bits.view(dtype)
    out = {"dtype": dtype_name, "inputs": int(x.numel()), "alphas": {}}
    for alpha in alphas:
        y = torch.full_like(bits, 0x7FC1).view(dtype)  # a NaN with a payload: poison
        module.elu(x, alpha, out=y)
        ref = F.elu(x, alpha)
        both_nan = y.isnan() & ref.isnan()
        same = (y.view(torch.int16) == ref.view(torch.int16)) | both_nan
        poisoned = int((y.view(torch.int16) == 0x7FC1).sum()) - int((ref.view(torch.int16) == 0x7FC1).sum())
        diff = (_ordered(y) - _ordered(ref)).abs()
        diff = diff[~same & ~(y.isnan() | ref.isnan())]
        out["alphas"][str(alpha)] = {
            "mismatches": int((~same).sum()),
            "max_ulp": int(diff.max()) if diff.numel() else 0,
            "untouched": max(poisoned, 0),
        }
    gen = torch.Generator(device="cuda").manual_seed(16)
    n = (1 << 22) + 5
    base = (torch.randn(n + 1, device="cuda", generator=gen) * 4).to(dtype)
    for name, view in (("aligned", base[:n]), ("misaligned", base[1:])):
        y = torch.full((n,), 0x7FC1, dtype=torch.int16, device="cuda").view(dtype)
        module.elu(view, 1.0, out=y)
        same = (y.view(torch.int16) == F.elu(view, 1.0).view(torch.int16))
        out[f"random_{name}_mismatches"] = int((~same).sum())
    out["random_length"] = n
    out["bit_identical"] = all(a["mismatches"] == 0 for a in out["alphas"].values()) and (
        out["random_aligned_mismatches"] == out["random_misaligned_mismatches"] == 0)
    # Every output written; and bit-identical where the formula is PyTorch's (expm1f): expf - 1 differs by design.
    out["passed"] = all(a["untouched"] == 0 for a in out["alphas"].values()) and (
        out["bit_identical"] or not expect_identical)
    return out


# -- the job -------------------------------------------------------------------------------------


def _repeat(path: Path, rounds: int) -> int:
    """One fresh process: time REPEATED in interleaved rounds and write the medians."""
    from .study import ENTRIES, measure

    record = measure([ENTRIES[n] for n in REPEATED], trials=1, rounds=rounds)
    path.write_text(json.dumps({r["name"]: {"median_ms": r["timing"]["median_ms"], "x_copy": r["x_copy"],
                                            "round_medians_ms": r["timing"]["round_medians_ms"]}
                                for r in record["rows"]}))
    return 0


def run(processes: int = 3, rounds: int = 5, profile_counters: bool = True) -> dict:
    import torch
    from tqdm.auto import tqdm

    from . import profile
    from .build import build_all
    from .study import ENTRIES, builds, measure

    todo = entries()
    build_all(builds(todo))
    record = measure(todo, trials=2, rounds=rounds, progress=True)
    record["accuracy16"] = {}
    for name in ("6_beyond_copy", "6_16bit_expf"):
        module = ENTRIES[name].build()
        identical = formula(ENTRIES[name], "OP16") == "Expm1f"
        record["accuracy16"][name] = {d: check_16bit(module, d, expect_identical=identical) for d in DTYPES16}
    torch.cuda.empty_cache()
    if profile_counters:
        counters = profile.profile(kernel_names())
        record["counters"] = {"ncu": counters["ncu"], "rows": counters["rows"]}
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in tqdm(range(processes), desc="fresh processes", unit="process"):
            path = Path(tmp, f"repeat{k}.json")
            subprocess.run([sys.executable, "-m", "elu_study", "beyond", "--repeat", str(path), "--rounds", "3"],
                           check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            runs.append(json.loads(path.read_text()))
    record["processes"] = runs
    record["method"]["processes"] = processes
    return record


def save(record: dict) -> Path:
    path = record_path(record["provenance"]["gpu"])
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def summary_frame(record: dict):
    """One row per attempt: time, x copy_, spread, and the DRAM counters beside it."""
    import pandas as pd

    counters = {r["name"]: r for r in record.get("counters", {}).get("rows", [])}
    rows = []
    for r in record["rows"]:
        t = r["timing"]
        c = counters.get(r["name"], {})
        rows.append({
            "entry": r["name"], "ms": t["median_ms"], "x copy_": r["x_copy"],
            "p10-p90 %": 100 * (t["p90_ms"] - t["p10_ms"]) / t["median_ms"],
            "TB/s": r["tbps"],
            "DRAM % peak": c.get("dram_pct_of_peak"),
            "DRAM GB read": c["dram_read_bytes"] / 1e9 if c else None,
            "DRAM GB written": c["dram_write_bytes"] / 1e9 if c else None,
            "what": r["what"],
        })
    return pd.DataFrame(rows)


def figures(record: dict) -> list[Path]:
    """results/<gpu>-beyond.png: every attempt's time over copy_'s, with the roof, the stream floor and spread."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .hardware import slug
    from .results import RESULTS_DIR

    rows = [r for r in record["rows"] if r["mode"] in ("", "in_place") and r["name"] not in ("read_only", "write_only")]
    rows.sort(key=lambda r: r["x_copy"])
    roof = record["roof_ms"]
    fig, ax = plt.subplots(figsize=(9, 0.33 * len(rows) + 1.8))
    y = np.arange(len(rows))[::-1]
    med = np.array([r["x_copy"] for r in rows])
    lo = med - np.array([r["timing"]["p10_ms"] for r in rows]) / roof
    hi = np.array([r["timing"]["p90_ms"] for r in rows]) / roof - med
    colors = ["tab:purple" if r["kind"] == "attempt" else "tab:blue" if r["kind"] == "step" else "tab:gray" for r in rows]
    ax.barh(y, med - 0.9, left=0.9, xerr=[lo.clip(0), hi.clip(0)], color=colors, capsize=2)
    ax.set_yticks(y, [r["name"] for r in rows], fontsize=8)
    ax.axvline(1.0, color="tab:green", ls="--", label=f"roof: copy_ {roof:.3f} ms")
    if record.get("stream_floor_ms"):
        ax.axvline(record["stream_floor_ms"] / roof, color="tab:red", ls=":",
                   label=f"read-only + write-only streams {record['stream_floor_ms']:.3f} ms")
    ax.set_xlim(0.9, max(med + hi) + 0.01)
    ax.set_xlabel("time over copy_'s (median; whiskers p10-p90; lower is better)")
    ax.set_title(f"Step 6's attempts, full size float32, {record['provenance']['gpu']}")
    from matplotlib.patches import Patch

    handles = [Patch(color="tab:purple", label="attempt (one change from 6_base)"), Patch(color="tab:blue", label="step"),
               Patch(color="tab:gray", label="baseline"), *ax.get_legend_handles_labels()[0]]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    fig.tight_layout()
    path = RESULTS_DIR / f"{slug(record['provenance']['gpu'])}-beyond.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study beyond", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes that time step 6 against copy_ again")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-counters", action="store_true", help="skip Nsight Compute")
    parser.add_argument("--repeat", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat:
        return _repeat(args.repeat, args.rounds)

    import torch

    from . import results

    if not torch.cuda.is_available():
        record = load()
        print("NO GPU HERE: the recorded run of step 6's attempts:\n")
        print(results.markdown(summary_frame(record)))
        return 0
    record = run(processes=args.processes, rounds=args.rounds, profile_counters=not args.no_counters)
    path = save(record)
    written = figures(record)
    print(results.markdown(summary_frame(record)))
    print(json.dumps(record["accuracy16"], indent=1))
    for run_ in record["processes"]:
        print({k: round(v["x_copy"], 4) for k, v in run_.items()})
    print(f"\nwrote {path} and {', '.join(map(str, written))}")
    failed = [r["name"] for r in record["rows"] if r["check"] and not r["check"]["passed"]]
    bad16 = [f"{n} {d}" for n, a in record["accuracy16"].items() for d, c in a.items() if not c["passed"]]
    if failed or bad16:
        print(f"FAILED: {failed + bad16}", file=sys.stderr)
        return 1
    return 0
