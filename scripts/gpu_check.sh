#!/usr/bin/env bash
# Run fleet-tui's NVML source on a real NVIDIA GPU for ~20 s and keep the evidence in $OUT
# (default ./gpu_check_out). Installs nothing. Extra arguments go to scripts/gpu_check.py
# (--duration S, --interval S, --load to add bf16 matmuls when torch is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=${PYTHON:-python3}; fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "note: nvidia-smi not found; the NVML check below will say whether a driver is usable" >&2
else
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit --format=csv || true
fi
exec "$PY" scripts/gpu_check.py "$@"
