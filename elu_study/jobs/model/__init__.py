"""The kernel in a model (GPU): ``python -m elu_study model`` writes results/<gpu>-model.json and its figure.

What it measures, at the study's shape (4096, 393216) float32 unless said otherwise, every entry checked
before it is timed, all timed together in interleaved do_bench rounds (elu_study.core.timing):

- forward: ``library.elu`` (eagerly: the binding; variants 2_float4 and 5_streaming) against
  ``F.elu`` and ``y.copy_(x)`` (the roof: two streams);
- backward: ``library.elu_backward`` (kernels/common/backward.cu) against
  ``aten.elu_backward`` and a measured three-stream reference, ``torch.add(x, g, out=c)`` (two reads,
  one write: the backward's traffic); 1.5x copy_'s time is only an estimate of that;
- CUDA graphs: the op's forward and backward (the ops, full shape) captured in one
  ``torch.cuda.CUDAGraph``, replayed into NaN-poisoned outputs and checked equal to eager, then timed
  against the same two ops run eagerly;
- the fusion lesson: ``F.elu(x) * 2 + 1`` eager (three kernels), under torch.compile with F.elu (one
  fused kernel, two streams), with the drop-in (its compile-time route: F.elu, fused) and with the custom
  op (``strict=True``: the op, then a fused ``* 2 + 1``: four streams);
- a small model: an MLP with nn.ELU against the same MLP through ``swap_elu``, forward + backward,
  eager and ``torch.compile(fullgraph=True)`` (the drop-in's fusing route, and the opaque op with
  ``strict=True``); and measure.TRAIN_STEPS Adam steps of each from the same weights towards a learnable
  target (a fixed random linear map of the input), so the loss moves; the same under bfloat16 autocast;
- the drop-in (schema 3): double backward of every step against F.elu's and gradgradcheck in float64, who
  computes each dtype and device (with PyTorch's results), the fusion routes, and the host's cost per call
  of the op, the binding and F.elu at 2^10..2^16 elements with a profile of one call (host.py).

The record this code writes is schema RECORD_SCHEMA; ``core.record.VERSIONS["model"]`` must say the same
before a run is saved (the committed record stays readable until then).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from elu_study.core.record import REFERENCE_GPU, VERSIONS, figure_path, load, save, save_figure
from elu_study.jobs.model import analysis, figures, measure

RECORD_SCHEMA = 3  # what measure.run writes: schema 2 plus double_backward, routing, autocast, host, fusion routes


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True) -> list[Path]:
    """The model figure again from ``gpu``'s record (no GPU needed); nothing where that GPU has none.
    (``readme`` is the report loop's switch: this job writes no README block.)"""
    record = load(gpu, "model", required=False)
    if record is None:
        return []
    return [save_figure(figures.figure(record), figure_path(gpu, "model"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study model", description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(measure.DEFAULT_VARIANTS),
                        help="comma-separated; the first is the op's")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--no-record", action="store_true", help="print only; write nothing under results/")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("elu-study model: needs a CUDA GPU (the recorded run is results/nvidia-h200-model.json; "
              "notebooks/11_in_a_model.ipynb shows it)", file=sys.stderr)
        return 2
    if not args.no_record and VERSIONS["model"] != RECORD_SCHEMA:
        print(f"elu-study model: this code writes schema {RECORD_SCHEMA} of the model record, but "
              f"elu_study/core/record.py has VERSIONS['model'] = {VERSIONS['model']}: set it to {RECORD_SCHEMA} "
              "first (or pass --no-record to print only)", file=sys.stderr)
        return 2
    record = measure.run([v.strip() for v in args.variants.split(",") if v.strip()], rounds=args.rounds)
    print(analysis.describe(record))
    if not args.no_record:
        path = save(record, "model")
        written = write_report(record["provenance"]["gpu"])
        print(f"\nwrote {path} and {', '.join(map(str, written))}")
    return 0
