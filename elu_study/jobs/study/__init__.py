"""``python -m elu_study [study]``: time every entry on a GPU (record, figures, README block), else show SASS."""

from __future__ import annotations

import argparse
import sys

import torch

from elu_study.core import record
from elu_study.core.build import build_all, compile_variant
from elu_study.core.entries import PEERS, STEPS, builds, study_entries, sustained_entries
from elu_study.core.harness import measure
from elu_study.core.sass import inspect_variant
from elu_study.jobs.study import backward
from elu_study.jobs.study.report import own_roof_rows, summary, write_report

__all__ = ["main", "write_report"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study [study]")
    parser.add_argument("--trials", type=int, default=3, help="correctness trials per entry")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--protocol", choices=("both", "short"), default="both",
                        help="short: interleaved rounds only; both: then the README's rows under sustained load too")
    parser.add_argument("--jobs", type=int, default=None, help="parallel builds (default: cores/2)")
    parser.add_argument("--no-readme", action="store_true", help="keep the README block")
    parser.add_argument("--confirm-backward", type=int, metavar="N", help="backward only: N fresh processes")
    args = parser.parse_args(argv)
    live = torch.cuda.is_available()
    if args.confirm_backward and live:
        rec = backward.confirm(args.confirm_backward)
        print(f"wrote {record.save(rec)}\n\n{backward.table(rec)}\n\n{backward.aim_line(rec)}")
        return 0
    build_all(builds() if live else builds(STEPS), workers=args.jobs)
    for entry in STEPS:
        print(f"\n[{entry.name}] {entry.what}")
        print(inspect_variant(compile_variant(entry.variant, extra_cuda_cflags=list(entry.flags))).summary())
    if live:
        rec = measure(study_entries(), trials=args.trials, rounds=args.rounds, progress=True,
                      sustained=sustained_entries() if args.protocol == "both" else ())
        path = record.save(rec)
        written = write_report(rec["provenance"]["gpu"], readme=not args.no_readme)
        print(f"\nwrote {path} and " + ", ".join(str(p) for p in written))
    else:
        rec = record.load()
    roofs = own_roof_rows(rec)
    print("\n" + summary(rec, live))
    failed = [r["name"] for r in rec["rows"] if r["check"] and not r["check"]["passed"]]
    failed += [r["name"] for r in roofs if (r.get("exhaustive") or {}).get("mismatches")
               and r["name"].split()[0] not in {e.name for e in PEERS}]  # a peer's mismatches are its own
    if failed:
        print(f"\nFAILED correctness: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
