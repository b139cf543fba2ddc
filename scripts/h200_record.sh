#!/usr/bin/env bash
# Regenerate the committed H200 records on a GPU machine, stage by stage:
#   bash scripts/h200_record.sh study profile accuracy   # the measurements
#   bash scripts/h200_record.sh notebooks tests          # notebooks executed and checked, GPU tests
#   bash scripts/h200_record.sh build optests notebook:11_in_a_model
#   bash scripts/h200_record.sh build gputests   # a new kernel's first GPU call: every test, no notebook, no record
#   bash scripts/h200_record.sh build gputests:"flushing or 4_fast_math"  # those tests only (pytest -k)
#   bash scripts/h200_record.sh records          # every due record (its inputs changed), resumable (python -m elu_study records)
#   UNTIL=540 bash scripts/h200_record.sh records:study,beyond  # those if due; none started that would end past 540 s
#   ONLY_ON=H200 bash scripts/h200_record.sh records  # nothing at all unless nvidia-smi names an H200 (exit 3): a
#                                                    # device call that may come on another GPU spends only its start
# Stages: build (every kernel build of every job, in parallel), study (results/<gpu>.json, figures, README block), profile (results/<gpu>-ncu.json),
# accuracy (results/<gpu>-accuracy.json), sanitize (results/<gpu>-sanitize.json), notebooks
# (executed in place, then re-run by nbval), tests (the whole suite, GPU tests and fuzzing
# included; results/<gpu>-tests.json), optests (the operator's tests alone, no record), notebook:NAME (one notebook executed in place). What changed is packed into $OUT/record.tar.gz when
# $OUT is set (the device tool's output folder); scripts/take_records.sh takes it into the tree before the next call.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ONLY_ON:-}" ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case "$gpu" in
    *"$ONLY_ON"*) ;;
    *) echo "ONLY_ON=$ONLY_ON: this machine's GPU is '${gpu:-none}'; nothing run" >&2; exit 3 ;;
  esac
fi
export PYTHONUNBUFFERED=1
export PYTHONPATH=$(pwd)${PYTHONPATH:+:$PYTHONPATH}  # notebook kernels start in notebooks/: find elu_study
if [ -d .whl ] && ! python3 -c "import nbval, ipykernel, msgspec" 2>/dev/null; then  # no jupyter or msgspec: carried wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  python3 -m ipykernel install --user >/dev/null
fi
if [ -z "${ELU_STUDY_COMMIT:-}" ] && [ -n "$(git status --porcelain 2>/dev/null | head -1)" ]; then
  # A copy of a working tree sent to a GPU machine can keep an older git state than the files it holds, clean or
  # not: give ELU_STUDY_COMMIT as the hash the sending machine names (not $(git rev-parse HEAD) run over there).
  echo "WARNING: uncommitted changes and no ELU_STUDY_COMMIT: records will name $(git describe --always --dirty)." \
       "Commit, then run with ELU_STUDY_COMMIT=<the commit sent>." >&2
fi
if [ -n "${ELU_STUDY_COMMIT:-}" ] && [ "$ELU_STUDY_COMMIT" = "$(git rev-parse HEAD 2>/dev/null)" ] \
   && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)" ]; then
  echo "ERROR: ELU_STUDY_COMMIT is this copy's git HEAD, which its files do not match (a stale git state):" \
       "give the hash of the commit sent, as the sending machine names it." >&2
  exit 2
fi
status=0
log() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
for stage in "$@"; do
  log "$stage"
  case "$stage" in
    build) python3 -m elu_study records --build-only || status=1 ;;  # every build at once, the drop-in's defaults included
    notebooks) python3 -m elu_study notebooks || status=1 ;;
    notebook:*) python3 -m elu_study notebooks "notebooks/${stage#notebook:}.ipynb" || status=1 ;;
    gputests) python3 -m pytest tests -q -n 8 --dist loadfile -p no:cacheprovider -o addopts="" --durations=8 \
                || status=1 ;;  # the suite alone, in parallel (GPU checks: every bit pattern, both exp builds, ...)
    gputests:*) python3 -m pytest tests -q -n 4 -p no:cacheprovider -o addopts="" -k "${stage#gputests:}" \
                  || status=1 ;;  # the tests pytest -k selects, e.g. gputests:"flushing or 4_fast_math"
    optests) python3 -m pytest tests/test_ops.py tests/test_op_properties.py -q -p no:cacheprovider -o addopts="" \
               || status=1 ;;  # -o addopts="": no nbval (the GPU test record is rewritten: commit the full suite's)
    tests) python3 -m pytest -q -x --durations=15 || status=1 ;;
    records|records:*) stages=${stage#records}; stages=${stages#:}
      python3 -m elu_study records ${stages//,/ } ${UNTIL:+--until "$UNTIL"} ${OUT:+--pack "$OUT/record.tar.gz"} \
        || status=1 ;;
    *) python3 -m elu_study "$stage" || status=1 ;;  # a job of python -m elu_study (study, profile, ...)
  esac
  if [ -n "${OUT:-}" ]; then  # after every stage, so a later stage that runs out of time loses nothing
    tar czf "$OUT/record.tar.gz" results notebooks README.md 2>/dev/null
  fi
done
exit $status
