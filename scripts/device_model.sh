#!/usr/bin/env bash
# The drop-in's run on a GPU machine (the device tool), in stages, each packed into $OUT as it ends:
#   bash scripts/device_model.sh build tests checks,host,eager      # one call
#   bash scripts/device_model.sh build compiled notebook            # the next
# build: the defaults' builds (and 1_naive, the tests' user build) in parallel; tests: the operator's tests on the
# GPU; a comma list of model parts: python -m elu_study model --parts ...; notebook: notebook 11 executed in place.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
export PYTHONPATH=$(pwd)${PYTHONPATH:+:$PYTHONPATH}
if [ -d .whl ] && ! python3 -c "import nbval, ipykernel" 2>/dev/null; then  # a machine without jupyter: carried wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  python3 -m ipykernel install --user >/dev/null
fi
export ELU_STUDY_COMMIT=${ELU_STUDY_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
status=0
for stage in "$@"; do
  echo; echo "=== $stage ($(date -u +%H:%M:%S))"
  case "$stage" in
    build) python3 -c "from elu_study.core.build import build_all; from elu_study.pytorch import ops
build_all(list(ops.default_builds().values()) + [('1_naive', ())])" || status=1 ;;
    tests) python3 -m pytest tests/test_ops.py tests/test_op_properties.py -q -p no:cacheprovider -o addopts="" \
             --durations=5 2>&1 | tail -40 || status=1 ;;
    notebook) python3 -m elu_study notebooks notebooks/11_in_a_model.ipynb || status=1 ;;
    *) python3 -m elu_study model --parts "$stage" || status=1 ;;
  esac
  if [ -n "${OUT:-}" ]; then
    tar czf "$OUT/record.tar.gz" results notebooks README.md 2>/dev/null
  fi
done
exit $status
