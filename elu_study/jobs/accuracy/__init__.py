"""Accuracy, exhaustively: every float32 bit pattern through five built formulas at alpha = 1 and 1.5 (a CUDA GPU),
into ``results/<gpu>-accuracy.json``; notebook 07 shows it. All but ``main`` and the kernels run on the CPU too."""

import argparse

import torch

from elu_study.core import record
from elu_study.core.build import build_all
from elu_study.core.hardware import provenance
from elu_study.jobs.accuracy import measure, notebook
from elu_study.jobs.accuracy.definitions import CHUNK_LOG2, FORMULAS, SAME_AS

def main(argv: list[str] | None = None) -> int:
    """Every float32 input through five of the study's formulas: ulp error against float64 (needs a CUDA GPU;
    writes results/<gpu>-accuracy.json)."""
    parser = argparse.ArgumentParser(prog="python -m elu_study accuracy", description=main.__doc__,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--chunk-log2", type=int, default=CHUNK_LOG2, help="log2 of the inputs per chunk")
    parser.add_argument("--jobs", type=int, default=None, help="parallel kernel builds (None: half the cores)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU (notebooks/07_accuracy.ipynb shows the recorded run)")
    build_all(sorted({(f.variant, ()) for f in FORMULAS if f.variant} | {(v, ()) for v in SAME_AS}), workers=args.jobs)
    rec = {"provenance": provenance(), **measure.measure(chunk_log2=args.chunk_log2)}
    path = record.save(rec, job="accuracy")
    print(*(notebook.md(t) for t in (notebook.formulas(rec), notebook.both(rec, notebook.summary),
                                     notebook.reference(rec))), path, sep="\n\n")
    return 0
