"""The study's main job: ``python -m elu_study``.

On a GPU: compile, check and time every step and baseline, then write
results/<gpu>.json, results/<gpu>.png and the README's table.
Without a GPU: compile every step, show what its SASS shows, and print the recorded results.
"""

from __future__ import annotations

import argparse
import sys

from . import plots, results
from .build import build_all, compile_variant
from .sass import inspect_variant
from .study import ENTRIES, KINDS, STEPS, builds, measure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="correctness trials per entry (fresh inputs each)")
    parser.add_argument("--jobs", type=int, default=None, help="parallel builds (default: half the cores)")
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite the README's results table")
    args = parser.parse_args(argv)

    import torch

    live = torch.cuda.is_available()
    jobs = builds() if live else builds(STEPS)
    build_all(jobs, workers=args.jobs)
    for entry in STEPS:
        print(f"\n[{entry.name}] {entry.what}")
        print(inspect_variant(compile_variant(entry.variant, extra_cuda_cflags=list(entry.flags))).summary())

    if live:
        record = measure(list(ENTRIES.values()), trials=args.trials, progress=True)
        path = results.save(record)
        figure = plots.save(plots.times_figure(record), path.with_suffix(".png"))
        if not args.no_readme:
            results.update_readme(record, figure)
        print(f"\nwrote {path}, {figure}" + ("" if args.no_readme else " and the README table"))
    else:
        record = results.load()
        print("\nNO GPU HERE: the kernels above were compiled and inspected; the table below is the recorded run.")
    print()
    print(results.markdown(results.frame(record, kinds=KINDS)))
    print()
    print(results.caption(record))
    failed = [r["name"] for r in record["rows"] if r["check"] and not r["check"]["passed"]]
    if failed:
        print(f"\nFAILED correctness: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
