"""The size sweep: every step and peer from 2^10 to 2^31 elements, cold, warm and on the host.

``python -m elu_study sizes`` measures, for each entry (every step, the peers and the PyTorch
baselines; the ablations are skipped) at every length of ``plan()``:

- a check: the output NaN-poisoned, then every element compared with ``F.elu`` (atol = rtol = 1e-4)
  and counted unwritten if still NaN, at every size (in chunks, so memory stays bounded);
- cold GPU time: each call after a 256 MiB write that flushes the L2 (do_bench's method), CUDA events
  around the call alone;
- warm GPU time: the same calls back to back with no flush, so x (just read) and y (just written)
  are L2-resident while the 8 bytes per element fit in the L2;
- host time per call: wall-clock of the Python call (the ``timed_call`` lambda a caller would write)
  in a tight loop while the GPU is held busy by a sleep kernel, so no call waits for the GPU and the
  time is the CPU-side cost alone: argument checks, the binding or dispatcher, the launch. The
  sleep is checked to outlast the loop (else the loop is repeated with a longer one).

The GPU timings, too, are enqueued behind a sleep kernel that outlasts the host's loop, so that no
event pair brackets time the GPU spent waiting for the host: at a few microseconds per kernel the
host is slower than the GPU, and without it the warm times would be host times.

It writes results/<gpu>-sizes.json (provenance, plan, method, and per entry, length and mode the
quantiles of the samples), its two figures, and the README's sizes block. Without a GPU it prints the
recorded run. The whole run is planned to fit in 4 minutes on an H200 (printed before it starts).

The package: ``plan`` (lengths, entries, run counts), ``measure`` (the GPU part), ``analysis`` (the record
read back), ``figures``, ``readme`` (the sweep in words) and ``notebook`` (notebook 09's view); here
``main(argv)`` and ``write_report(gpu)``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from elu_study.core.build import build_all
from elu_study.core.entries import builds
from elu_study.core.paths import RESULTS_DIR
from elu_study.core.record import REFERENCE_GPU, load, record_path, save, slug, write_block
from elu_study.core.tables import markdown
from elu_study.jobs.sizes.analysis import FORMATS, frame
from elu_study.jobs.sizes import measure, plan
from elu_study.jobs.sizes.figures import write_figures
from elu_study.jobs.sizes.readme import block, summary_lines


def write(record: dict, readme: bool = True, results_dir: Path | None = None) -> list[Path]:
    """The figures, and (for the reference GPU's record in results/) the README's sizes block."""
    paths = write_figures(record, results_dir)
    in_results = results_dir is None or Path(results_dir).resolve() == RESULTS_DIR.resolve()
    if readme and in_results and slug(record["provenance"]["gpu"]) == REFERENCE_GPU:
        paths.append(write_block("sizes", block(record, paths)))
    return paths


def write_report(gpu: str = REFERENCE_GPU, readme: bool = True, results_dir: Path | None = None) -> list[Path]:
    """The figures and README block again from a GPU's committed sweep (no GPU needed); [] where it has none."""
    record = load(gpu, "sizes", results_dir, required=False)
    return [] if record is None else write(record, readme=readme, results_dir=results_dir)


def print_record(record: dict) -> None:
    """A few lengths of the sweep as a table, and the sweep in words."""
    shown = [n for n in record["sizes"] if n in (record["sizes"][0], 2**16, 2**20, 2**24, record["sizes"][-1])]
    print(markdown(frame(record, sizes=shown), FORMATS))
    print()
    print("\n".join(summary_lines(record)))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m elu_study sizes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-exp", type=int, default=plan.MAX_EXP, help="largest length 2^k (default 31)")
    parser.add_argument("--min-exp", type=int, default=plan.MIN_EXP, help="smallest length 2^k (default 10)")
    parser.add_argument("--no-extra", action="store_true", help="powers of two only (no odd or decimal lengths)")
    parser.add_argument("--entries", default=None, help="comma-separated entry names (default: steps, peers, baselines)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where the record and figures go")
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite the README's sizes block")
    return parser.parse_args(argv)


def show_recorded(results_dir: Path) -> int:
    """Without a GPU: the reference GPU's recorded sweep, printed (2 if there is none)."""
    record = load(REFERENCE_GPU, "sizes", results_dir, required=False)
    path = record_path(REFERENCE_GPU, "sizes", results_dir)
    if record is None:
        print(f"NO GPU HERE, and no recorded sweep ({path}): run `python -m elu_study sizes` on a GPU.", file=sys.stderr)
        return 2
    print(f"NO GPU HERE: the recorded sweep, {path}:\n")
    print_record(record)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not torch.cuda.is_available():
        return show_recorded(args.results_dir)

    entries = plan.sweep_entries(args.entries.split(",") if args.entries else None)
    sizes = plan.plan(args.max_exp, args.min_exp, extra=not args.no_extra)
    print(plan.describe_plan(sizes, entries))
    jobs = builds(entries)
    if jobs:
        build_all(jobs)  # also from a process that has used CUDA already (a test session)
    started = time.time()
    record = measure.measure(entries, sizes)
    record["wall_s"] = round(time.time() - started, 1)
    path = save(record, "sizes", args.results_dir)
    written = write(record, readme=not args.no_readme, results_dir=args.results_dir)
    print(f"\nmeasured in {record['wall_s']:.0f} s; wrote {path} and " + ", ".join(str(p) for p in written))
    print(f"torch.compile graphs compiled during the sweep: {record['torch_compile_graphs']}")
    print()
    print_record(record)
    failed = [f"{q['entry']} @ {plan.fmt_n(q['n'])}" for q in record["points"] if q.get("check") and not q["check"]["passed"]]
    if failed or record["errors"]:
        print(f"\nFAILED correctness: {', '.join(failed) or 'none'}; errors: {len(record['errors'])}", file=sys.stderr)
        for e in record["errors"]:
            print(f"  {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
