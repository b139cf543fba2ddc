"""Step 6's measurement (GPU): the attempts timed beside copy_ (each 16-bit row checked on every bit pattern by the
harness), their DRAM counters (Nsight Compute), and step 6 against copy_ again in fresh processes."""

import re

import torch

from elu_study.core.build import build_all, resolve_variant
from elu_study.core.entries import ATTEMPTS, ENTRIES, builds, sustained_entries
from elu_study.core.harness import measure
from elu_study.core.ncu import profile
from elu_study.core.processes import fresh_processes

# The rows every attempt is compared with, timed in the same rounds.
COMPARED = ("copy_", "read_only", "write_only", "2_float4", "2+128_threads", "5_streaming", "F.elu", "6_beyond_copy")
# What each fresh process times (the claim, its control and the roof).
REPEATED = ("copy_", "2_float4", "2+128_threads", "6_beyond_copy")


def formula16(name: str) -> str:
    """A build's 16-bit formula: its -DELU6_OP16 flag, else its kernel file's default."""
    entry = ENTRIES[name]
    flag = next((f for f in entry.flags if f.startswith("-DELU6_OP16=")), None)
    return flag.split("=", 1)[1] if flag else re.search(r"#define ELU6_OP16 (\w+)",
                                                        resolve_variant(entry.variant).read_text()).group(1)


def failed(record: dict) -> list[str]:
    """The rows that failed their check: a float32 row's, or a 16-bit row's on every bit pattern (an output left
    unwritten; a mismatch where the formula is PyTorch's, expm1f: expf - 1 differs by design)."""
    bad = [r["name"] for r in record["rows"] if r["check"] and not r["check"]["passed"]]
    return bad + [r["name"] for r in record["rows"] if (c := r.get("exhaustive")) and (
        c["untouched"] or c["mismatches"] and formula16(r["name"]) == "Expm1f")]


def sustained(todo) -> list:
    """The rows of ``todo`` timed under sustained load too: the attempts marked so, step 6's default and copy_, their
    roof. The other rows compared are timed so in the main record."""
    return sustained_entries([e for e in todo if e.sustained or e.name in ("copy_", "6_beyond_copy")])


def run(processes: int = 3, rounds: int = 5, profile_counters: bool = True) -> dict:
    """The record of ``python -m elu_study beyond``: the attempts beside COMPARED (those the catalogue marks
    ``sustained``, step 6 and copy_ under sustained load too), their counters and ``processes`` fresh processes."""
    todo = [ENTRIES[n] for n in COMPARED] + list(ATTEMPTS)
    build_all(builds(todo))
    record = measure(todo, trials=1, rounds=rounds, progress=True, sustained=sustained(todo))  # one full-size input
    torch.cuda.empty_cache()
    if profile_counters:  # copy_ of either dtype is a driver copy, not a kernel ncu can see
        counters = profile([e.name for e in todo if not e.name.startswith("copy_")])
        record["counters"] = {"ncu": counters["ncu"], "rows": counters["rows"]}
    record["processes"] = fresh_processes(REPEATED, processes)
    return record
