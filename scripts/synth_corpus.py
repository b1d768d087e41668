"""Write the SYNTHETIC labelled traces (tests/fixtures/traces/synthetic/): cases no recording covers.

    .venv/bin/python scripts/synth_corpus.py [--out DIR]

These are not measurements. Each case is generated from the physics stated below, in the raw
capture format ``scripts/capture_corpus.py`` writes (a ``static`` line marked ``"synthetic":
true``, the ``labels`` line, a ``note`` line saying what it is, then a sample every 0.5 s), so the
analysis and ``bench/bench_diagnosis_accuracy.py`` read them as they read the real takes. The rules
they exercise are tested on synthetic traces only until a GPU session records them
(docs/monitor.md lists which).

The device: an NVIDIA H200 as NVML reports it (141 GB, 700 W limit, 1980 MHz max SM clock, PCIe
Gen5 x16), the values of the real take c's ``static`` line.

Physics each case models:

* **Power and clocks.** Board power is idle power plus a dynamic part that grows with each unit's
  activity, at the max clock: P = 80 W + 9.4 W/% x tensor + 2.2 W/% x DRAM + 1.5 W/% x SM
  activity. The coefficients are fitted to the real demo trace (fleet_tui/demo): its HBM-copy phase
  (DRAM 87 %, SM 99 %, 1973 MHz) drew 423 W, its bf16 GEMM phase (tensor 92 %, DRAM 17 %, SM 95 %)
  664 W at the 700 W cap and 1482 MHz, i.e. ~1120 W of demand at 1980 MHz with dynamic power
  ~ f² (f·V², V rising with f). Where the demand exceeds the enforced limit the driver lowers the
  clock until it fits: f = f_max x sqrt((limit - 80) / (demand - 80)), and sets the clock-event
  reason "SW power cap" (0x4); an idle GPU reports reason 0x1 (GPU idle) and its idle clock.
* **GPM counters.** ``gpm_sm_util``, ``gpm_any_tensor_util`` and ``gpm_fp*`` are shares of cycles
  at the current clock; ``gpm_dram_bw_util`` is a share of peak DRAM bandwidth, which a lower SM
  clock does not change. Each reading carries Gaussian noise (sd 1.5 points), clipped to 0-100.
* **Memory.** ``mem_used_bytes`` is what processes hold plus ~0.6 GB the driver keeps. A leak adds a
  fixed number of bytes per step; when a process reaches the device's memory it gets an
  out-of-memory error, exits, and its memory is freed at once.
* **A mat-vec / small-batch decode step** reads every weight once per token: ~2 FLOP per 2-byte
  weight, 1 FLOP/B, far below the H200's ridge (~206 FLOP/B); the tensor pipes idle while the
  weights stream, so DRAM runs at ~63 % of peak and the tensor pipes at ~30 %. This server's
  board is held at 500 W (``nvidia-smi -pl 500``, as inference fleets do to save power), so the
  decode runs at its power cap.
* **A serving engine** (vLLM) loads its weights over PCIe (host-to-device at ~5 GB/s), then
  reserves its KV-cache pool in one allocation to ``gpu_memory_utilization`` = 0.90 of the device,
  and holds it flat whatever the load.
* **A plateau**: a training job's caching allocator grows in a few steps during its first
  iterations and then holds its blocks: flat memory under steady bf16 compute.
* **A leak from the start**: a loop keeping each step's activations from its first step on an
  empty device (no host-to-device traffic), to out of memory.
* **A weights load, then a plateau**: 120 GB copied from pinned host memory over PCIe at
  ~26 GB/s (host-to-device traffic equal to the memory's rate), then flat while serving.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "traces" / "synthetic"
INTERVAL_S = 0.5
GAP_S = 4.0
TOTAL = 150754820096  # bytes, the H200 of take c
DRIVER = 648347648  # bytes the driver holds with no process (take c's idle reading)
LIMIT_W, IDLE_W = 700.0, 80.0
W_PER_TENSOR_PCT, W_PER_DRAM_PCT, W_PER_SM_PCT = 9.4, 2.2, 1.5  # fitted to the demo trace
CLOCK_MAX, CLOCK_IDLE = 1980.0, 345.0
GB = 1e9

STATIC = {"kind": "static", "name": "NVIDIA H200", "uuid": "GPU-5e7e7e7e-synthetic",
          "memory_total_bytes": TOTAL, "power_limit_mw": int(LIMIT_W * 1000),
          "max_sm_clock_mhz": int(CLOCK_MAX), "max_mem_clock_mhz": 3201, "slowdown_temp_c": 89,
          "pcie_gen_cur": 5, "pcie_width_cur": 16, "mig_mode": [0, 0], "gpm_supported": True,
          "synthetic": True}


class Work(dict):
    """What the GPU does in one sample: GPM shares (percent), PCIe (bytes/s), processes."""


def _work(sm: float = 0.0, tensor: float = 0.0, dram: float = 0.0, fp32: float = 0.0,
          util: float | None = None, rx: float = 0.0, procs: list | None = None) -> Work:
    return Work(sm=sm, tensor=tensor, dram=dram, fp32=fp32,
                util=(100.0 if sm > 1 else 0.0) if util is None else util, rx=rx,
                procs=procs or [])


def _sample(rng: random.Random, t: float, phase: str, w: Work, limit_w: float = LIMIT_W) -> dict:
    def noisy(v: float) -> float:
        return 0.0 if v <= 0 else min(100.0, max(0.0, rng.gauss(v, 1.5)))

    sm, tensor, dram, fp32 = (noisy(w["sm"]), noisy(w["tensor"]), noisy(w["dram"]),
                              noisy(w["fp32"]))
    busy = w["util"] > 0
    demand = IDLE_W + W_PER_TENSOR_PCT * tensor + W_PER_DRAM_PCT * dram + W_PER_SM_PCT * sm
    if not busy:
        clock, power, reasons = CLOCK_IDLE, IDLE_W + rng.gauss(0, 0.3), 0x1
    elif demand > limit_w:  # the power limit lowers the clock until the board fits it
        clock = CLOCK_MAX * ((limit_w - IDLE_W) / (demand - IDLE_W)) ** 0.5
        power, reasons = limit_w - abs(rng.gauss(0, 4.0)), 0x4
    else:
        clock, power, reasons = CLOCK_MAX, demand + rng.gauss(0, 3.0), 0x0
    used = DRIVER + sum(p["used_bytes"] for p in w["procs"])
    rx = max(0.0, rng.gauss(w["rx"], w["rx"] * 0.03)) if w["rx"] else 0.0
    return {"kind": "sample", "t": round(t, 3), "phase": phase, "gpu_util": round(w["util"]),
            "mem_util": round(dram * 0.9), "mem_used_bytes": int(used), "temp_c": 40 + power / 20,
            "power_mw": int(power * 1000), "sm_clock_mhz": int(clock), "mem_clock_mhz": 3201,
            "clock_event_reasons": reasons, "pstate": 0, "pcie_tx_kb_s": 500,
            "pcie_rx_kb_s": int(rx / 1000) + 500, "procs": w["procs"],
            "gpm_graphics_util": sm, "gpm_sm_util": sm, "gpm_sm_occupancy": sm * 0.4,
            "gpm_any_tensor_util": tensor, "gpm_hmma_tensor_util": tensor,
            "gpm_dram_bw_util": dram, "gpm_fp32_util": fp32, "gpm_fp16_util": 0.0,
            "gpm_pcie_tx_mib_s": 0.5, "gpm_pcie_rx_mib_s": rx / 2**20 + 0.5,
            "gpm_nvlink_rx_mib_s": 0.0, "gpm_nvlink_tx_mib_s": 0.0, "host_cpu_pct": 4.0,
            "host_cpu_per_core_pct": [20.0] + [3.0] * 15, "host_mem_pct": 10.0}


def _proc(pid: int, used: float, command: str = "python train.py") -> dict:
    return {"pid": pid, "used_bytes": int(used), "command": command}


Case = Callable[[float], Iterator[tuple[str, Work]]]  # duration -> (label, work) per sample


def _steps(seconds: float) -> int:
    return int(round(seconds / INTERVAL_S))


def idle(_: float = 0.0) -> Iterator[tuple[str, Work]]:
    for _k in range(_steps(8.0)):
        yield "idle", _work()


def leak_to_oom() -> Iterator[tuple[str, Work]]:
    """Idle compute; one 60 GB allocation, then +6.5 GB every 0.5 s (13 GB/s) until the next
    step does not fit: out of memory; the process unwinds (the exception, its traceback, the CUDA
    context's teardown: ~1.5 s) and exits, and its memory is freed."""
    held = 60 * GB
    while DRIVER + held + 6.5 * GB <= TOTAL:
        yield "leak_to_oom", _work(sm=0.0, procs=[_proc(4101, held)])
        held += 6.5 * GB
    for _k in range(_steps(2.0)):  # the failed allocation, then the process unwinding
        yield "leak_to_oom", _work(procs=[_proc(4101, held)])
    for _k in range(_steps(3.0)):  # after the OOM: nothing runs, memory freed
        yield "idle_gap", _work()


def leak_under_compute() -> Iterator[tuple[str, Work]]:
    """bf16 training (compute-bound) keeping 0.5 GB more every 0.5 s (1 GB/s) from 55 % of the
    device until 92 %, where the job stops by itself."""
    held = 0.55 * TOTAL
    while DRIVER + held < 0.92 * TOTAL:
        yield "leak_under_compute", _work(sm=95, tensor=80, dram=22, fp32=4,
                                          procs=[_proc(4102, held)])
        held += 0.5 * GB


def matvec_decode() -> Iterator[tuple[str, Work]]:
    """Small-batch decode: 1 FLOP/B, DRAM ~63 % of peak, tensor ~30 %, at the power cap."""
    for _k in range(_steps(20.0)):
        yield "matvec_decode", _work(sm=88, tensor=30, dram=63, fp32=6,
                                     procs=[_proc(4103, 18 * GB, "python decode.py --batch 4")])


def engine_pool() -> Iterator[tuple[str, Work]]:
    """vLLM: 16 GB of weights over PCIe at ~5 GB/s, the KV pool reserved in one step to 0.90 of
    the device, then no requests (idle), then small-batch decode."""
    cmd = "python -m vllm.entrypoints.openai.api_server --model llama-3.1-8b"
    held = 0.0
    while held < 16 * GB:
        held = min(16 * GB, held + 2.6 * GB)
        yield "engine_load", _work(sm=2, util=30, rx=5.2 * GB, procs=[_proc(4104, held, cmd)])
    pool = 0.90 * TOTAL - DRIVER
    for _k in range(_steps(14.0)):
        yield "engine_pool_idle", _work(procs=[_proc(4104, pool, cmd)])
    for _k in range(_steps(18.0)):
        yield "engine_pool_decode", _work(sm=85, tensor=24, dram=68, fp32=5,
                                          procs=[_proc(4104, pool, cmd)])


def plateau() -> Iterator[tuple[str, Work]]:
    """bf16 training whose caching allocator grows by 4 GB at each of its first 8 steps (every
    0.5 s), then holds its blocks: flat at ~40 GB."""
    held = 8 * GB
    for _k in range(8):
        held += 4 * GB
        yield "plateau_warmup", _work(sm=95, tensor=85, dram=25, fp32=3,
                                      procs=[_proc(4105, held)])
    for _k in range(_steps(22.0)):
        yield "plateau", _work(sm=95, tensor=85, dram=25, fp32=3, procs=[_proc(4105, held)])


def leak_from_start() -> Iterator[tuple[str, Work]]:
    """bf16 training that keeps each step's activations (a list that grows): +6.5 GB every 0.5 s
    (13 GB/s) from its first step on an empty device, until the next step does not fit: out of
    memory, the process unwinds (~1.5 s) and exits. Its first second is what a job's start
    looks like: memory rising fast from low, no host-to-device traffic."""
    held = 6.5 * GB
    while DRIVER + held + 6.5 * GB <= TOTAL:
        yield "leak_from_start", _work(sm=95, tensor=80, dram=22, fp32=4, procs=[_proc(4106, held)])
        held += 6.5 * GB
    for _k in range(_steps(2.0)):  # the failed allocation: no kernels, the memory still held
        yield "oom_unwinding", _work(procs=[_proc(4106, held)])
    for _k in range(_steps(3.0)):
        yield "idle_gap", _work()


def weights_load() -> Iterator[tuple[str, Work]]:
    """A server (not one of the engines that reserve a pool) loading 120 GB of weights from
    pinned host memory over PCIe Gen5 x16 at ~26 GB/s (41 % of the link: a pinned copy reaches
    85-90 % of it, a pageable one about half), 13 GB per 0.5 s, then serving: bf16 compute on
    memory that stays flat at ~80 % of the device."""
    cmd = "python serve.py --checkpoint /ckpt/model-60b"
    held = 0.0
    while held < 120 * GB:
        held = min(120 * GB, held + 13 * GB)
        yield "weights_load", _work(sm=2, util=30, rx=26 * GB, procs=[_proc(4107, held, cmd)])
    for _k in range(_steps(16.0)):
        yield "weights_loaded", _work(sm=95, tensor=60, dram=30, fp32=3,
                                      procs=[_proc(4107, held, cmd)])


LABELS = {
    "idle": {"expected": ["idle"], "risks": [], "no_risks": ["memory_growth"]},
    # the phase closes full and flat (the process unwinding): capacity is its risk then; the
    # growth before it is scored tick by tick (the bench's OOM score)
    "leak_to_oom": {"expected": ["memory_growth", "memory_capacity_pressure"],
                    "risks": ["memory_capacity_pressure"], "no_risks": []},
    "leak_under_compute": {"expected": ["healthy_compute", "memory_growth"],
                           "risks": ["memory_growth"], "no_risks": []},
    "matvec_decode": {"expected": ["memory_bandwidth_bound"], "risks": [], "no_risks": []},
    "engine_pool_idle": {"expected": ["idle"], "risks": [],
                         "no_risks": ["memory_growth", "memory_capacity_pressure"]},
    "engine_pool_decode": {"expected": ["memory_bandwidth_bound"], "risks": [],
                           "no_risks": ["memory_growth", "memory_capacity_pressure"]},
    "plateau": {"expected": ["healthy_compute", "power_capped"], "risks": [],
                "no_risks": ["memory_growth"]},
    "idle_gap": {"expected": ["idle"], "risks": [], "no_risks": []},
    # a leak from an empty device: critical from its third like rise (its first two are what a
    # job's start looks like); the phase closes full and flat, as leak_to_oom's
    "leak_from_start": {"expected": ["memory_growth", "memory_capacity_pressure"],
                        "risks": ["memory_growth"], "no_risks": []},
    # after the out-of-memory error: no kernels while the process unwinds, its memory held
    "oom_unwinding": {"expected": ["memory_capacity_pressure", "idle"], "risks": [],
                      "no_risks": []},
    # a load that would fill the device if it went on: critical while it fills at that rate;
    # once loaded and flat, no growth
    "weights_load": {"expected": ["host_transfer_bound", "memory_growth"], "risks": [],
                     "no_risks": []},
    "weights_loaded": {"expected": ["healthy_compute", "power_capped"], "risks": [],
                       "no_risks": ["memory_growth"]},
}
# file -> (cases, the board's enforced power limit in W)
CASES: dict[str, tuple[tuple[Callable[[], Iterator[tuple[str, Work]]], ...], float]] = {
    "synthetic_leak_to_oom.jsonl": ((leak_to_oom, leak_under_compute), LIMIT_W),
    "synthetic_matvec_decode.jsonl": ((matvec_decode,), 500.0),
    "synthetic_engine_pool.jsonl": ((engine_pool,), LIMIT_W),
    "synthetic_plateau.jsonl": ((plateau,), LIMIT_W),
    "synthetic_leak_from_start.jsonl": ((leak_from_start,), LIMIT_W),
    "synthetic_weights_load.jsonl": ((weights_load,), LIMIT_W),
}


def write(path: Path, cases: tuple[Callable[[], Iterator[tuple[str, Work]]], ...],
          seed: int, limit_w: float = LIMIT_W) -> int:
    rng = random.Random(seed)
    t, n = 0.0, 0
    used = {lab for case in cases for lab, _ in case()} | {"idle", "idle_gap"}
    labels = {k: v for k, v in LABELS.items() if k in used}
    with path.open("w") as fh:
        fh.write(json.dumps(dict(STATIC, power_limit_mw=int(limit_w * 1000))) + "\n")
        fh.write(json.dumps({"kind": "labels", "labels": labels}) + "\n")
        fh.write(json.dumps({"kind": "note", "text": "SYNTHETIC: generated by "
                             "scripts/synth_corpus.py from the physics in its docstring; not a "
                             "measurement"}) + "\n")
        for case in (idle,) + cases:
            for label, w in case():
                fh.write(json.dumps(_sample(rng, t, label, w, limit_w)) + "\n")
                t += INTERVAL_S
                n += 1
            for _k in range(_steps(GAP_S)):
                fh.write(json.dumps(_sample(rng, t, "idle_gap", _work(), limit_w)) + "\n")
                t += INTERVAL_S
                n += 1
    return n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for i, (name, (cases, limit_w)) in enumerate(CASES.items()):
        n = write(args.out / name, cases, seed=34 + i, limit_w=limit_w)
        print(f"{args.out / name}: {n} samples")


if __name__ == "__main__":
    main()
