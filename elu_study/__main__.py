"""The study's jobs: ``python -m elu_study [study|profile|accuracy|sanitize|report]``.

study (the default): on a GPU, compile, check and time every step, ablation and baseline once,
then write results/<gpu>.json, its figures and the README's block. Without a GPU, compile every
step, show what its SASS shows, and print the recorded results.
profile: hardware counters of every kernel with Nsight Compute (GPU and ncu): results/<gpu>-ncu.json.
accuracy: every float32 input through every formula, in ulp (GPU): results/<gpu>-accuracy.json.
sanitize: compute-sanitizer over a small-input run of every build (GPU).
beyond: step 6's attempts to beat copy_, with counters, 16-bit storage and fresh processes (GPU, ncu):
results/<gpu>-beyond.json.
launch: the launch-shape sweep, threads x float4s per thread x hints and grid-stride blocks per SM, one build
(GPU): results/<gpu>-launch.json and its heatmaps; without a GPU, the recorded sweep.
model: the kernel as a custom op in use: forward/backward, fusion, a small model (GPU): results/<gpu>-model.json.
sizes: every step and peer from 2^10 to 2^31 elements: GPU time cold and warm, host time per call (GPU):
results/<gpu>-sizes.json, its figures and the README's sizes block; without a GPU, the recorded sweep.
report: figures and the README block again from the committed records (no GPU needed).
"""

from __future__ import annotations

import argparse
import sys

# job -> the module whose main(argv) runs it ("study" and "report" live here).
JOBS = {
    "study": None,
    "report": None,
    "profile": "elu_study.jobs.profile",
    "accuracy": "elu_study.jobs.accuracy.measure",
    "sanitize": "elu_study.jobs.sanitize",
    "sizes": "elu_study.jobs.sizes",
    "beyond": "elu_study.jobs.beyond",
    "launch": "elu_study.jobs.launch",
    "model": "elu_study.jobs.model",
}


def study_main(argv: list[str]) -> int:
    from elu_study.jobs.study import report
    from elu_study.core import record as results
    from elu_study.core.build import build_all, compile_variant
    from elu_study.core.sass import inspect_variant
    from elu_study.core.entries import KINDS, STEPS, builds, study_entries
    from elu_study.core.harness import measure

    parser = argparse.ArgumentParser(prog="python -m elu_study [study]")
    parser.add_argument("--trials", type=int, default=3, help="correctness trials per entry (fresh inputs each)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--jobs", type=int, default=None, help="parallel builds (default: half the cores)")
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite the README's results block")
    args = parser.parse_args(argv)

    import torch

    live = torch.cuda.is_available()
    build_all(builds() if live else builds(STEPS), workers=args.jobs)
    for entry in STEPS:
        print(f"\n[{entry.name}] {entry.what}")
        print(inspect_variant(compile_variant(entry.variant, extra_cuda_cflags=list(entry.flags))).summary())

    if live:
        record = measure(study_entries(), trials=args.trials, rounds=args.rounds, progress=True)
        path = results.save(record)
        written = report.write(record["provenance"]["gpu"], readme=not args.no_readme)
        print(f"\nwrote {path} and " + ", ".join(str(p) for p in written))
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


def report_main(argv: list[str]) -> int:
    from elu_study.jobs.study import report
    from elu_study.core import record as results

    parser = argparse.ArgumentParser(prog="python -m elu_study report")
    parser.add_argument("gpu", nargs="?", default=results.REFERENCE_GPU)
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args(argv)
    for path in report.write(args.gpu, readme=not args.no_readme):
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    job = argv.pop(0) if argv and argv[0] in JOBS else "study"
    if argv and argv[0] in ("-h", "--help") and job == "study" and not any(a in JOBS for a in argv):
        print(__doc__)
    if job == "study":
        return study_main(argv)
    if job == "report":
        return report_main(argv)
    import importlib

    return importlib.import_module(JOBS[job]).main(argv)


if __name__ == "__main__":
    sys.exit(main())
