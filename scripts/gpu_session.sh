#!/usr/bin/env bash
# One prepared session on a lent GPU machine (a few minutes): the NVML source, the monitor and the
# app on real hardware (scripts/gpu_check.py), then the two labelled corpus takes for issue 10
# (scripts/capture_corpus.py: take a = tune, take b = holdout at other sizes, rates and interval).
# Everything lands in $OUT (default ./gpu_session_out), at most 8 files:
#   session.log, gpu_check.log, gpu_check_summary.json, gpu_check_trace.jsonl, gpu_check_app.svg,
#   monitor_once.json, corpus_a.jsonl, corpus_b.jsonl
# Where the machine lacks fleet-tui's dependencies, put cp3XX wheels in .whl/ (see README,
# "Checking on a real GPU"); they are installed to /tmp/site, nothing system-wide.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_session_out}; export OUT; mkdir -p "$OUT"
source scripts/device_env.sh
SECONDS_PER=${SECONDS_PER:-10}
exec > >(tee "$OUT/session.log") 2>&1
date -u; uname -r
nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit,clocks.max.sm,pcie.link.gen.current,pcie.link.width.current --format=csv || true
"$PY" -c "import pynvml, torch, sys; print('python', sys.version.split()[0], 'nvidia-ml-py', getattr(pynvml, '__version__', '?'), 'torch', torch.__version__)"
echo "== gpu_check (NVML source, analysis, app)"
"$PY" scripts/gpu_check.py --duration 24 --interval 0.5 --load --app 10; echo "gpu_check rc=$?"
echo "== monitor --once --json --source nvml"
timeout 60 "$PY" -m fleet_tui monitor --once --json --source nvml > "$OUT/monitor_once.json"; echo "monitor rc=$?"
echo "== corpus take a (tune), 0.2 s"
"$PY" scripts/capture_corpus.py "$OUT/corpus_a.jsonl" --take a --seconds "$SECONDS_PER" --gap 3 --interval 0.2; echo "take a rc=$?"
echo "== corpus take b (holdout), 0.5 s"
"$PY" scripts/capture_corpus.py "$OUT/corpus_b.jsonl" --take b --seconds "$SECONDS_PER" --gap 3 --interval 0.5; echo "take b rc=$?"
date -u
