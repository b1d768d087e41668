# Sourced by the scripts run on a lent GPU machine (gpu_session.sh, gpu_monitor_cpu.sh), from the
# repository root: installs the carried wheels in .whl/ (cp3XX manylinux: fleet-tui's dependencies,
# nvitop) to /tmp/site only, puts a carried tmux (.tmuxbin/) on PATH where the machine has none,
# and sets PY. Exits 3 when the wheels do not install.
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
fi
if ! command -v tmux >/dev/null 2>&1 && [[ -x .tmuxbin/tmux ]]; then
  export PATH="$PWD/.tmuxbin:$PATH" LD_LIBRARY_PATH="$PWD/.tmuxbin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
PY=${PYTHON:-python3}
