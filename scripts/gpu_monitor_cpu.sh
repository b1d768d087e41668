#!/usr/bin/env bash
# On a lent GPU machine, in one go (~6 minutes): the current code on real hardware
# (scripts/gpu_check.py with the app), `monitor --once` with GPM, then the Monitor pane's CPU on
# `--source nvml` beside the bare Textual floor and beside nvitop on the same GPU
# (bench/bench_monitor_cpu.py, issue 13). Everything lands in $OUT (default ./gpu_cpu_out), at most
# 8 files: session.log, gpu_check.log, gpu_check_summary.json, gpu_check_trace.jsonl,
# gpu_check_app.svg, monitor_once.json, gpm_cost.log, bench_cpu.log.
#
# What the machine lacks travels with the checkout, nothing is installed system-wide:
#   .whl/      cp312 manylinux wheels of fleet-tui's dependencies and nvitop -> /tmp/site
#   .tmuxbin/  a tmux binary and its two libraries, used only when the machine has no tmux
# CASES (default below) and WINDOW (seconds per measurement) tune the CPU part; SKIP_CHECK=1 skips
# gpu_check and monitor --once (a second lease that only measures).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_cpu_out}; export OUT; mkdir -p "$OUT"
source scripts/device_env.sh
CASES=${CASES:-nvml@1,nvitop@1,nvml@0.25,nvitop@0.25,sim:64@1}
WINDOW=${WINDOW:-20}
exec > >(tee "$OUT/session.log") 2>&1
date -u; uname -r; nproc; tmux -V
nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit --format=csv || true
"$PY" -c "import sys, pynvml, textual; print('python', sys.version.split()[0], 'nvidia-ml-py', getattr(pynvml, '__version__', '?'), 'textual', textual.__version__)"
"$PY" -m compileall -q fleet_tui bench  # byte code as an installed package has it
if [[ -z "${SKIP_CHECK:-}" ]]; then
echo "== gpu_check (NVML source, analysis, app)"
"$PY" scripts/gpu_check.py --duration 16 --interval 0.5 --load --app 8; echo "gpu_check rc=$?"
echo "== monitor --once --json --source nvml (GPM needs two samples an interval apart)"
TIMEFORMAT='monitor --once took %R s'
time timeout 60 "$PY" -m fleet_tui monitor --once --json --source nvml > "$OUT/monitor_once.json"
echo "monitor rc=$?"
"$PY" - "$OUT/monitor_once.json" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))["devices"][0]
except (ValueError, KeyError, IndexError) as exc:
    sys.exit(f"monitor --once gave no device reading: {exc}")
keys = ("sm_active_pct", "tensor_active_pct", "dram_active_pct", "gpu_util_pct", "power_w")
print("monitor --once:", {k: d.get(k) for k in keys})
EOF
fi
echo "== what each NVML call costs this process (wall and CPU), GPM by metric count"
"$PY" scripts/gpu_gpm_cost.py 2>&1 | tee "$OUT/gpm_cost.log"
echo "== Monitor pane CPU beside the floor and nvitop: $CASES, ${WINDOW} s windows"
"$PY" bench/bench_monitor_cpu.py --cases "$CASES" --window "$WINDOW" --warmup 4 2>&1 \
  | tee "$OUT/bench_cpu.log"
echo "bench rc=${PIPESTATUS[0]}"
date -u
