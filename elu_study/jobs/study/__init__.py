"""``python -m elu_study [study]``: time every entry on a GPU (record, figures, README block), else show SASS."""

import argparse
import os
import sys

import torch

from elu_study.core import record, text
from elu_study.core.build import build_all, compile_variant, configure_toolchain, default_workers
from elu_study.core.entries import DTYPES16, ENTRIES, PEERS, STEPS, builds, study_entries, sustained_entries
from elu_study.core.harness import measure
from elu_study.core.sass import inspect_variant
from elu_study.jobs.study.report import fit, own_roof_rows, summary, write_report

__all__ = ["main", "write_report"]

# Each kernel file's SASS, shown by every run: the steps, and step 7's build (its float32 kernel).
SASS_SHOWN = (*STEPS, ENTRIES[f"7_sixteen_bits {DTYPES16[0]}"])
# Seconds for the opening line's estimate, cold, as a 2-core machine without a GPU took (2026-12-05): the shared
# binding once, a build on one core, one build's SASS shown.
BINDING_S, BUILD_S, SASS_S = 25.0, 6.0, 3.0


def estimate(gpu: str | None, builds: int, workers: int) -> str:
    """Roughly how long the run takes: builds and SASS from the costs above, the measurement as the last run took."""
    seconds = BINDING_S + BUILD_S * builds / max(workers, 1) + SASS_S * len(SASS_SHOWN)
    last = ((record.held_fingerprint(gpu) if gpu else None) or {}).get("seconds")
    if gpu and last is None:
        return f"builds about {seconds / 60:.0f} min cold; no earlier run here says how long the measurement takes"
    return f"about {(seconds + (last or 0)) / 60:.0f} min cold, less where builds are cached"


def plan(gpu: str | None, builds: int, workers: int, trials: int, rounds: int, sustained: int, readme: bool) -> str:
    """The opening lines: whether a GPU was found (its name, or None) and what will run."""
    configure_toolchain()
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    return fit(text.render("study/plan.md.j2", gpu=gpu, builds=builds, workers=workers, entries=len(study_entries()),
                           estimate=estimate(gpu, builds, workers),
                           trials=trials, rounds=rounds, sustained=sustained, readme=readme,
                           path=record.record_path(gpu or record.REFERENCE_GPU),
                           arch="/".join(f"sm_{a.replace('.', '')}" for a in arch.replace(";", " ").split())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study [study]")
    # One full-size input per entry shows every element written and within tolerance of F.elu; what a formula gives
    # on every float32 input is the accuracy job's (exhaustive), and other lengths and layouts are the tests' fuzzing.
    parser.add_argument("--trials", type=int, default=1, help="full-size correctness trials per entry")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--protocol", choices=("both", "short"), default="both",
                        help="short: interleaved rounds only; both: then the README's rows under sustained load too")
    parser.add_argument("--jobs", type=int, default=None,
                        help=f"parallel builds (default: one per core, {default_workers(os.cpu_count() or 2)} here)")
    parser.add_argument("--no-readme", action="store_true", help="keep the README block")
    args = parser.parse_args(argv)
    live = torch.cuda.is_available()
    jobs = builds() if live else builds(SASS_SHOWN)
    workers = args.jobs or default_workers(len(jobs))
    sustained = sustained_entries() if args.protocol == "both" else []
    print(plan(record.this_gpu(), len(jobs), workers, args.trials, args.rounds, len(sustained), not args.no_readme),
          flush=True)
    build_all(jobs, workers=workers)
    for entry in SASS_SHOWN:
        report = inspect_variant(compile_variant(entry.variant, extra_cuda_cflags=list(entry.flags)))
        print("\n" + fit(text.render("study/sass.md.j2", entry=entry, summary=report.summary())))
    if live:
        rec = measure(study_entries(), trials=args.trials, rounds=args.rounds, progress=True, sustained=sustained)
        path = record.save(rec)
        written = write_report(rec["provenance"]["gpu"], readme=not args.no_readme)
        print(f"\nwrote {path} and " + ", ".join(str(p) for p in written))
    else:
        rec = record.load()
    print("\n" + summary(rec, live))
    failed = [r["name"] for r in rec["rows"] if r["check"] and not r["check"]["passed"]]
    failed += [r["name"] for r in own_roof_rows(rec) if (r.get("exhaustive") or {}).get("mismatches")
               and r["name"].split()[0] not in {e.name for e in PEERS}]  # a peer's mismatches are its own
    if failed:
        print(f"\nFAILED correctness: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0
