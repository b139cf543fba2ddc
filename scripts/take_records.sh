#!/usr/bin/env bash
# Take what a GPU call packed (scripts/h200_record.sh's $OUT/record.tar.gz) into this working tree, before the next
# call sends the tree again (each call replaces the GPU machine's tracked files with this tree's):
#   bash scripts/take_records.sh /path/to/record.tar.gz          # results/ only (records and figures)
#   bash scripts/take_records.sh /path/to/record.tar.gz --all    # also notebooks/ and README.md: a run on the
#                                                                 # reference GPU whose notebooks were executed there
# On another GPU the study job writes its own numbers into the README, so --all belongs to reference-GPU runs only.
set -euo pipefail
archive=$(realpath "$1"); shift || true
cd "$(dirname "$0")/.."
members=(results)
if [ "${1:-}" = "--all" ]; then members+=(notebooks README.md); fi
tar xzf "$archive" "${members[@]}"
git status --short -- "${members[@]}"
