"""The study's jobs: ``python -m elu_study [job] [options]``; each job is elu_study.jobs.<job> (``job --help``).

study (the default): on a GPU, compile, check and time every step, ablation and baseline once: results/<gpu>.json,
its figures and the README's block; without a GPU, every step's SASS and the recorded results.
profile (ncu), accuracy, sanitize, beyond (ncu), launch, model, sizes, sixteen (ncu): one record each (GPU),
results/<gpu>-<job>.json (profile's: -ncu.json); launch and sizes show the recorded sweep without a GPU.
report: every job's figures and README block again from the committed records (no GPU needed).
records: every record whose inputs changed measured again (--plan: which and why), each job in a fresh process,
resumable (GPU).
notebooks: execute the notebooks in place (on the GPU whose numbers they should carry; needs nbclient).
"""

import importlib
import sys

# job -> the module whose main(argv) runs it
JOBS = {job: f"elu_study.jobs.{job}" for job in ("study", "report", "profile", "accuracy", "sanitize", "sizes",
                                                 "beyond", "launch", "model", "sixteen", "notebooks", "records")}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    job = argv.pop(0) if argv and argv[0] in JOBS else "study"
    if argv and argv[0] in ("-h", "--help") and job == "study":
        print(__doc__)
    return importlib.import_module(JOBS[job]).main(argv)


if __name__ == "__main__":
    sys.exit(main())
