"""The study's jobs: ``python -m elu_study [job] [options]``; each job is elu_study.jobs.<job>.

study (the default): on a GPU, compile, check and time every step, ablation and baseline once,
then write results/<gpu>.json, its figures and the README's block. Without a GPU, compile every
step, show what its SASS shows, and print the recorded results.
profile: hardware counters of every kernel with Nsight Compute (GPU and ncu): results/<gpu>-ncu.json.
accuracy: every float32 input through each formula of jobs/accuracy/definitions.py, in ulp (GPU):
results/<gpu>-accuracy.json.
sanitize: compute-sanitizer over a small-input run of every build (GPU).
beyond: step 6's attempts to beat copy_, with counters, 16-bit storage and fresh processes (GPU, ncu):
results/<gpu>-beyond.json.
launch: the launch-shape sweep, threads x float4s per thread x hints and grid-stride blocks per SM, one build
(GPU): results/<gpu>-launch.json and its heatmaps; without a GPU, the recorded sweep.
model: the drop-in in use: checks, host cost per call, whole steps of four models (GPU): results/<gpu>-model.json.
sizes: every step and peer from 2^10 to 2^31 elements: GPU time cold and warm, host time per call (GPU):
results/<gpu>-sizes.json, its figures and the README's sizes block; without a GPU, the recorded sweep.
sixteen: step 7, 16-bit storage at its own roof: exhaustive bitwise checks, the fast formulas' distance to
expm1f, times against the 16-bit copy_, counters (GPU, ncu): results/<gpu>-sixteen.json.
report: every job's figures and README block again from the committed records (no GPU needed).
records: every record above measured again at one commit, each job in a fresh process, resumable (GPU).
notebooks: execute the notebooks in place (on the GPU whose numbers they should carry; needs nbclient).
"""

from __future__ import annotations

import importlib
import sys

# job -> the module whose main(argv) runs it
JOBS = {job: f"elu_study.jobs.{job}" for job in
        ("study", "report", "profile", "accuracy", "sanitize", "sizes", "beyond", "launch", "model",
                  "sixteen", "notebooks", "records")}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    job = argv.pop(0) if argv and argv[0] in JOBS else "study"
    if argv and argv[0] in ("-h", "--help") and job == "study":
        print(__doc__)
    return importlib.import_module(JOBS[job]).main(argv)


if __name__ == "__main__":
    sys.exit(main())
