"""Hardware counters of the study's kernels, read with Nsight Compute (``ncu --clock-control none``): each entry
runs once at full size inside a profiler range that a marker kernel opens, so that an entry's kernels are combined."""

import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from elu_study.core.build import find_cuda_tool
from elu_study.core.entries import ENTRIES
from elu_study.core.harness import input_tensor, quiet, timed_call
from elu_study.core.hardware import SHAPE, provenance

METRICS = {  # name in the record -> ncu metric
    "duration_ns": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "dram_pct_of_peak": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "warp_instructions": "smsp__inst_executed.sum",
    "sm_cycles_per_s": "smsp__cycles_elapsed.avg.per_second",
}
# Warp stall reasons, as the warp-state section gives them: warps stalled per issued instruction.
STALL_REASONS = ("long_scoreboard", "lg_throttle", "drain", "wait", "not_selected", "selected", "math_pipe_throttle",
                 "mio_throttle", "no_instruction", "short_scoreboard", "dispatch_stall", "branch_resolving", "barrier",
                 "membar", "sleeping", "tex_throttle", "imc_miss", "misc")
STALL_METRICS = tuple(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS)
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
MARKER = "spin_kernel"  # torch.cuda._sleep's kernel: opens each entry's profiled range
# Counters that add up over an entry's kernels; the rest are averaged, weighted by duration.
_SUMMED = ("duration_ns", "dram_read_bytes", "dram_write_bytes", "warp_instructions", "grid_size")
_TAKEN = ("registers", "block_size")  # launch facts: the largest of the kernels


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list[dict]:
    """Rows of ``ncu --import ... --csv --page raw --print-units base`` as {column: value} (its units row skipped)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu raw CSV header (a line starting with \"ID\") in the output")
    header, _units, *rows = csv.reader(lines[start:])
    return [dict(zip(header, values)) for values in rows if len(values) == len(header)]


def kernel_counters(row: dict) -> dict:
    """The study's counters and stall reasons from one parsed CSV row, in base units."""
    out: dict = {"kernel": row.get("Kernel Name", "?")}
    out |= {name: _number(row.get(metric, "")) for name, metric in METRICS.items()}
    stalls = {m.group(1): _number(v) for c, v in row.items() if (m := _STALL.match(c)) and _number(v) is not None}
    out["stalls"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1]))
    return out


def split_by_marker(kernels: list[dict]) -> list[list[dict]]:
    """Kernels in launch order -> one list per profiled entry, each opened by a marker kernel."""
    groups: list[list[dict]] = []
    for k in kernels:
        if MARKER in k["kernel"]:
            groups.append([])
        elif not groups:
            raise ValueError(f"kernel {k['kernel']!r} was profiled before any marker")
        else:
            groups[-1].append(k)
    return groups


def combine(kernels: list[dict]) -> dict:
    """One entry's counters from its kernels: sums of counts, duration-weighted means of rates."""
    if not kernels:
        raise ValueError("an entry launched no kernel inside its profiled range")
    if len(kernels) == 1:
        return {**kernels[0], "kernels": 1}
    t = [k.get("duration_ns") or 0.0 for k in kernels]
    weighted = lambda values: sum(v * w for v, w in zip(values, t)) / sum(t)
    out: dict = {"kernel": kernels[0]["kernel"], "kernels": len(kernels)}
    for key in METRICS:
        values = [k.get(key) for k in kernels]
        how = sum if key in _SUMMED else max if key in _TAKEN else weighted
        out[key] = None if None in values else how(values)
    reasons = {r for k in kernels for r in k["stalls"]}
    stalls = {r: weighted([k["stalls"].get(r, 0.0) for k in kernels]) for r in reasons}
    out["stalls"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1]))
    return out


def derived(counters: dict, numel: int) -> dict:
    """Per-kernel numbers a reader compares: DRAM bytes over the least possible, instructions per element."""
    d = {}
    rd, wr = counters.get("dram_read_bytes"), counters.get("dram_write_bytes")
    if rd is not None and wr is not None:
        d["dram_bytes_over_min"] = (rd + wr) / (8 * numel)
    if counters.get("warp_instructions") is not None:
        d["thread_instructions_per_element"] = counters["warp_instructions"] * 32 / numel
    return d


def target(names: list[str], manifest: Path) -> int:
    """Run inside ncu: each entry once at full size, between profiler start and stop."""
    with quiet():
        x = input_tensor()
        y = torch.empty_like(x)
        for name in names:
            call = timed_call(ENTRIES[name], x, y)
            call(), call()  # builds, compiles (torch.compile) and allocates outside the profiled range
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            torch.cuda._sleep(1)  # the marker that opens this entry's kernels
            call()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
    manifest.write_text(json.dumps(names))
    return 0


def profile(names: list[str]) -> dict:
    """Profile the named entries under ncu; return the counter record."""
    ncu = find_cuda_tool("ncu")
    with tempfile.TemporaryDirectory() as tmp:
        report, manifest = Path(tmp, "elu.ncu-rep"), Path(tmp, "manifest.json")
        command = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
                   "--metrics", ",".join([*METRICS.values(), *STALL_METRICS]),
                   "--export", str(report), "--force-overwrite",
                   sys.executable, "-m", "elu_study.core.ncu", str(manifest), *names]
        env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "1"}  # no compile workers for ncu to follow
        bar, log = tqdm(total=2 * len(names), desc="profiling (ncu)", unit="kernel"), []
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
            for line in proc.stdout:
                log.append(line)
                if line.startswith("==PROF== Profiling"):  # a bar step at each profiled kernel
                    bar.update()
        bar.close()
        if proc.returncode != 0:
            raise RuntimeError(f"ncu failed ({proc.returncode}):\n{''.join(log[-40:])}")
        text = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"],
                              capture_output=True, text=True, check=True).stdout
        ran = json.loads(manifest.read_text())
    groups = split_by_marker([kernel_counters(r) for r in parse_raw_csv(text)])
    if len(groups) != len(ran):
        raise RuntimeError(f"expected {len(ran)} profiled entries, found {len(groups)} marker-opened groups: "
                           f"{[[k['kernel'] for k in g] for g in groups]}")
    numel = SHAPE[0] * SHAPE[1]
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    counters = [combine(kernels) for kernels in groups]
    return {
        "provenance": provenance(),
        "ncu": {"version": version, "clock_control": "none", "metrics": METRICS, "stall_metrics": list(STALL_METRICS),
                "command": " ".join(command[:command.index(sys.executable)])},
        "problem": {"shape": list(SHAPE), "numel": numel},
        "note": "copy_ is a driver copy, not a kernel: ncu does not see it; copy_kernel stands in for it.",
        "rows": [{"name": name, **c, **derived(c, numel)} for name, c in zip(ran, counters)],
    }


SCHEDULERS = 4  # warp schedulers per SM on Hopper, each issuing one warp instruction per cycle


def counter_rows(record: dict) -> dict[str, dict]:
    """A record's counter rows (``record["counters"]["rows"]``) by entry name; empty where it has none."""
    return {r["name"]: r for r in record.get("counters", {}).get("rows", [])}


def issue_ms(counter_row: dict, sm_count: int) -> float:
    """Time (ms) the SMs need to issue a kernel's warp instructions, SCHEDULERS per SM per cycle at ncu's SM clock."""
    return counter_row["warp_instructions"] / (sm_count * SCHEDULERS * counter_row["sm_cycles_per_s"]) * 1e3


def issue_pct(record: dict, name: str) -> float | None:
    """The share (%) of a kernel's run time that issuing its warp instructions takes, or None without counters."""
    k = counter_rows(record).get(name, {})
    if not k.get("warp_instructions") or not k.get("sm_cycles_per_s") or not k.get("duration_ns"):
        return None
    return 100 * issue_ms(k, record["provenance"]["sm_count"]) / (k["duration_ns"] / 1e6)


def counter_frame(record: dict, names=None):
    """One line per kernel: time, DRAM bytes and throughput, L2, occupancy, registers, top stalls."""
    columns = {"duration_ns": "ncu ms", "dram_read_bytes": "DRAM read GB", "dram_write_bytes": "DRAM write GB",
               "dram_pct_of_peak": "DRAM % of peak", "l2_hit_pct": "L2 hit %", "achieved_occupancy_pct": "occupancy %",
               "registers": "regs", "thread_instructions_per_element": "inst/elem"}
    rows = pd.DataFrame(record["rows"], columns=["name", *columns, "stalls"]).set_index("name").rename_axis("entry")
    if names is not None:
        rows = rows.loc[[n for n in names if n in rows.index]]
    df = rows[list(columns)].astype(float).rename(columns=columns)
    df["ncu ms"] = df["ncu ms"].where(df["ncu ms"] != 0) / 1e6
    df[["DRAM read GB", "DRAM write GB"]] /= 1e9
    df["top stalls (warps per issue)"] = [", ".join(f"{s} {v:.0f}" for s, v in list(stalls.items())[:2])
                                         for stalls in rows["stalls"]]
    return df


if __name__ == "__main__":  # the process ncu profiles: python -m elu_study.core.ncu MANIFEST NAME...
    sys.exit(target(sys.argv[2:], Path(sys.argv[1])))
