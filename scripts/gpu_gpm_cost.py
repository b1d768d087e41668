"""What one tick's NVML calls cost the monitor's process on a real GPU: wall time and the calling
thread's CPU time, and how ``nvmlGpmMetricsGet`` scales with the number of metrics asked for.

    python scripts/gpu_gpm_cost.py [--reps 40]

Prints one line per measurement and a JSON summary on the last line. Needs a GPU with NVML (GPM
for the GPM part). Run by ``scripts/gpu_monitor_cpu.sh``; installs nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn, reps: int) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(reps):
        c0, w0 = time.thread_time(), time.perf_counter()
        fn()
        cpus.append((time.thread_time() - c0) * 1e6)
        walls.append((time.perf_counter() - w0) * 1e6)
    return {"wall_us": round(statistics.median(walls), 1), "cpu_us": round(statistics.median(cpus), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    args = ap.parse_args()
    import pynvml as nv

    from fleet_tui.core.monitor.sources.nvml.gpm import GPM_METRICS

    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    out: dict[str, dict] = {}
    calls = {
        "utilization_rates": lambda: nv.nvmlDeviceGetUtilizationRates(h),
        "memory_info": lambda: nv.nvmlDeviceGetMemoryInfo(h),
        "power_usage": lambda: nv.nvmlDeviceGetPowerUsage(h),
        "temperature": lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
        "compute_processes": lambda: nv.nvmlDeviceGetComputeRunningProcesses(h),
    }
    for name, fn in calls.items():
        out[name] = timed(fn, args.reps)
        print(f"{name:<28} {out[name]}", flush=True)
    if not nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice:
        print("GPM not supported on this device")
    else:
        s1, s2 = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
        out["gpm_sample_get"] = timed(lambda: nv.nvmlGpmSampleGet(h, s1), args.reps)
        print(f"{'gpm_sample_get':<28} {out['gpm_sample_get']}", flush=True)
        time.sleep(0.2)
        nv.nvmlGpmSampleGet(h, s2)
        ids = [getattr(nv, name) for name, _t, _s in GPM_METRICS if hasattr(nv, name)]
        for n in sorted({1, 2, 4, 7, 10, len(ids)}):
            req = nv.c_nvmlGpmMetricsGet_t()
            req.version = nv.NVML_GPM_METRICS_GET_VERSION
            req.numMetrics = n
            req.sample1, req.sample2 = s1, s2
            for j, mid in enumerate(ids[:n]):
                req.metrics[j].metricId = mid
            key = f"gpm_metrics_get_{n}"
            out[key] = timed(lambda req=req: nv.nvmlGpmMetricsGet(req), args.reps)
            print(f"{key:<28} {out[key]}", flush=True)
        for name, _t, _s in GPM_METRICS:  # each metric alone: is one of them the expensive one?
            if not hasattr(nv, name):
                continue
            req = nv.c_nvmlGpmMetricsGet_t()
            req.version = nv.NVML_GPM_METRICS_GET_VERSION
            req.numMetrics = 1
            req.sample1, req.sample2 = s1, s2
            req.metrics[0].metricId = getattr(nv, name)
            key = "gpm_one_" + name.removeprefix("NVML_GPM_METRIC_").lower()
            out[key] = timed(lambda req=req: nv.nvmlGpmMetricsGet(req), max(10, args.reps // 4))
            print(f"{key:<28} {out[key]}", flush=True)
        nv.nvmlGpmSampleFree(s1)
        nv.nvmlGpmSampleFree(s2)
    nv.nvmlShutdown()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
