"""Accuracy, exhaustively: every float32 input through five of the study's formulas, in ulp (the record lists them).

``python -m elu_study accuracy`` (needs a CUDA GPU) runs all 2^32 float32 bit patterns through
each formula's real built kernel (and through ``F.elu`` and ``torch.compile(F.elu)``), at
alpha = 1 (the task's) and alpha = 1.5, and compares every output with ELU computed in float64
and rounded to float32 (see ``reference`` for the definitions of ulp and error). It writes
``results/<gpu>-accuracy.json`` with the run's provenance; ``notebooks/07_accuracy.ipynb`` shows it.

The package, by role: ``definitions`` (formulas, bins, special inputs, the method's text),
``reference`` (bits, ulps, bounds, the correctly rounded reference), ``accumulate`` (a chunk and one
formula's running figures), ``measure`` (the sweep), ``analysis`` (tables, sentences) and ``figures``.
Everything except ``main`` and the kernels works on CPU tensors too; the tests use that.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core import record
from elu_study.core.build import build_all
from elu_study.core.hardware import provenance
from elu_study.jobs.accuracy import measure
from elu_study.jobs.accuracy.definitions import CHUNK_LOG2, FORMULAS, SAME_AS

JOB = "accuracy"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m elu_study accuracy",
        description="Every float32 input through five of the study's formulas: ulp error against float64 "
                    "(needs a CUDA GPU; writes results/<gpu>-accuracy.json).",
    )
    parser.add_argument("--chunk-log2", type=int, default=CHUNK_LOG2,
                        help=f"inputs per chunk, as a power of 2 (default {CHUNK_LOG2}: under 10 GB of GPU memory)")
    parser.add_argument("--jobs", type=int, default=None, help="parallel kernel builds (default: half the cores)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("python -m elu_study accuracy needs a CUDA GPU: it runs every float32 input through the built kernels. "
              f"The recorded run is results/{record.record_path(record.REFERENCE_GPU, JOB).name}; "
              "notebooks/07_accuracy.ipynb shows it.", file=sys.stderr)
        return 2
    build_all(sorted({(f.variant, ()) for f in FORMULAS if f.variant} | {(v, ()) for v in SAME_AS}), workers=args.jobs)
    body = measure.measure(chunk_log2=args.chunk_log2)
    rec = {"provenance": provenance(), **body}
    path = record.save(rec, job=JOB)
    print("\n".join(measure.summary_lines(rec)))
    m = rec["method"]
    print(f"\n{m['n_inputs']} inputs x {len(m['alphas'])} alphas in {m['seconds']} s "
          f"(peak GPU memory {m['peak_gpu_memory_gib']} GiB); wrote {path}")
    for run in rec["runs"].values():
        for name, d in run["same_as"].items():
            if d["n_differ"]:
                print(f"NOTE: {name} is not bit-identical to {d['as']} ({d['n_differ']} inputs)", file=sys.stderr)
    return 0


def write_report(gpu: str = record.REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """Nothing to write: this job has no figure under results/ and no README block (notebook 07 draws its
    figures from the record), so ``readme`` (the report loop's switch) changes nothing. Checks that the
    GPU's record, if there is one, is one this code reads."""
    record.load(gpu, job=JOB, required=False)
    return []
