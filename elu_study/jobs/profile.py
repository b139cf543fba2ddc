"""``python -m elu_study profile``: hardware counters of every kernel of the main study, read with
Nsight Compute (GPU and ncu), saved as results/<gpu>-ncu.json. How they are read: elu_study.core.ncu."""

import argparse

import torch

from elu_study.core import record
from elu_study.core.build import build_all
from elu_study.core.entries import ENTRIES, builds, profiled_entries
from elu_study.core.ncu import counter_frame, profile
from elu_study.core.tables import markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="entries to profile (default: every kernel entry)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.exit(2, "elu-study profile: needs a CUDA GPU (and ncu); the recorded counters are in results/\n")
    names = args.names or [e.name for e in profiled_entries()]
    build_all(builds([ENTRIES[n] for n in names]))
    counters = profile(names)
    path = record.save(counters, "ncu")
    print(f"{markdown(counter_frame(counters))}\n\nwrote {path}")
    return 0
