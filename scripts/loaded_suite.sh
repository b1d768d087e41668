#!/usr/bin/env bash
# The whole test suite N times in a row on one loaded CPU core, to find tests that only fail on a
# busy machine (issue 13: "run the whole suite under taskset -c 0 with two busy loops beside it
# three times before calling it done"). Each run is a fresh clone of this checkout's HEAD with its
# own venv (the README's test command), pinned with taskset to CORE beside two `yes` loops on the
# same core. Stops at the first failing run; logs in $OUT (default /tmp/loaded-suite).
#
#   bash scripts/loaded_suite.sh [N=3] [CORE=0]
#
# PYTEST_ARGS (default empty: the whole suite) narrows it, e.g. PYTEST_ARGS=tests/ui.
# Needs taskset (util-linux) and what the suite needs (see the README); ~15 min a run on a
# 2-core machine.
set -u
runs=${1:-3}; core=${2:-0}
repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/loaded-suite}; mkdir -p "$OUT"
command -v taskset >/dev/null || { echo "loaded_suite: taskset not found (util-linux)" >&2; exit 2; }
commit=$(git -C "$repo" rev-parse --short HEAD)
for i in $(seq 1 "$runs"); do
  dir="$OUT/run$i"; rm -rf "$dir"
  git clone -q "$repo" "$dir" || exit 2
  (cd "$dir" && python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]') >"$OUT/run$i.install.log" 2>&1 \
    || { echo "loaded_suite: install failed, see $OUT/run$i.install.log" >&2; exit 2; }
  taskset -c "$core" sh -c 'exec yes >/dev/null' & y1=$!
  taskset -c "$core" sh -c 'exec yes >/dev/null' & y2=$!
  start=$(date +%s)
  (cd "$dir" && taskset -c "$core" .venv/bin/python -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-}) >"$OUT/run$i.log" 2>&1
  rc=$?
  kill "$y1" "$y2" 2>/dev/null; wait "$y1" "$y2" 2>/dev/null
  echo "run $i of $runs (commit $commit, core $core): $(tail -n 1 "$OUT/run$i.log") [$(( $(date +%s) - start )) s]"
  [ "$rc" -eq 0 ] || { echo "loaded_suite: run $i failed, see $OUT/run$i.log" >&2; exit 1; }
done
