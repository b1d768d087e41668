"""Where a window sits on the device's roofline: compute-bound or memory-bound, from physics.

The roofline model (Williams, Waterman, Patterson, "Roofline: an insightful visual performance
model", CACM 52(4), 2009): a kernel of arithmetic intensity I (FLOP per byte of DRAM traffic) runs
at most at min(peak_flops, I x peak_bandwidth). The two roofs meet at the **ridge point**
I* = peak_flops / peak_bandwidth (an H200: 989.5 TFLOP/s bf16 / 4.8 TB/s = 206 FLOP/B). Below the
ridge the DRAM roof is the nearer one: memory-bound; above it, compute-bound.

GPM gives the two utilisations directly: ``dram_active_pct`` is achieved DRAM bandwidth as a share
of peak, ``tensor_active_pct`` (or the FP32/FP16 pipe's) the share of cycles the math pipe issues,
at the current clock. The achieved compute share of the *rated* peak is that times
sm_clock / sm_clock_max (a power-capped GPU at 1509 of 1980 MHz has 76 % of its rated FLOP/s).
Then achieved intensity I = (compute_share x peak_flops) / (dram_share x peak_bw), so
I / I* = compute_share / dram_share: **the window is below the ridge exactly when its DRAM share
exceeds its compute share**, on any device. The device's peaks (``catalogs/accelerators.toml``)
turn that ratio into FLOP/B for people; the decision needs no device table and no fitted number.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from fleet_tui.core import paths


class Peaks(NamedTuple):
    """A device's published dense peaks (``catalogs/accelerators.toml``, each row's source)."""

    name: str  # the catalog's name for it
    tensor_flops: float | None  # dense bf16 (else fp16) FLOP/s
    fp32_flops: float | None  # FP32 (CUDA cores) FLOP/s
    bandwidth_bytes_s: float | None  # DRAM (HBM/GDDR) bytes/s

    def ridge(self, tensor: bool = True) -> float | None:
        """The ridge point in FLOP/B for the tensor (or FP32) pipe."""
        flops = self.tensor_flops if tensor else self.fp32_flops
        if not flops or not self.bandwidth_bytes_s:
            return None
        return flops / self.bandwidth_bytes_s


class Roofline(NamedTuple):
    """One window against the roofline (shares of the rated peaks, 0-1)."""

    compute_share: float  # achieved math throughput / rated peak (clock-scaled)
    dram_share: float  # achieved DRAM bandwidth / peak
    pipe: str  # "tensor", "FP32" or "FP16": the busiest math pipe
    clock_frac: float  # sm_clock / sm_clock_max (1.0 when unknown)

    @property
    def below_ridge(self) -> bool:
        """The DRAM roof is the nearer one: memory-bound (achieved intensity under the ridge)."""
        return self.dram_share >= self.compute_share

    @property
    def intensity_vs_ridge(self) -> float | None:
        """Achieved arithmetic intensity as a multiple of the ridge point (I / I*)."""
        return self.compute_share / self.dram_share if self.dram_share > 0 else None


def roofline_of(tensor: float | None, fp32: float | None, fp16: float | None,
                dram: float | None, sm_clock: float | None,
                sm_clock_max: float | None) -> Roofline | None:
    """The window's position from its GPM means (percent); None without DRAM bandwidth."""
    if dram is None:
        return None
    pipes = (("tensor", tensor), ("FP32", fp32), ("FP16", fp16))
    pipe, busiest = max(((p, v) for p, v in pipes if v is not None), key=lambda pv: pv[1],
                        default=("tensor", 0.0))
    clock_frac = (sm_clock / sm_clock_max) if sm_clock and sm_clock_max else 1.0
    clock_frac = 1.0 if clock_frac > 1.0 else clock_frac
    return Roofline(busiest / 100.0 * clock_frac, dram / 100.0, pipe, clock_frac)


def _entries() -> list[dict]:
    from fleet_tui.core.tomlio import tomllib  # the project's TOML reader (tomli before 3.11)

    with (paths.bundled_catalog_dir() / "accelerators.toml").open("rb") as fh:
        return list(tomllib.load(fh).get("accelerator", []))


def _tokens(text: str) -> set[str]:
    return {t for t in text.upper().replace("-", " ").replace("_", " ").replace("(", " ")
            .replace(")", " ").split() if t}


@lru_cache(maxsize=64)
def device_peaks(device_name: str) -> Peaks | None:
    """The catalog's peaks for a device as NVML names it ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):
    the entry whose model (its name's first word) is a word of the device's name, the one sharing
    most words with it (first listed on a tie: the SXM part). Read once per name."""
    words = _tokens(device_name)
    best, best_score = None, 0
    try:
        entries = _entries()
    except (OSError, ValueError):
        return None
    for e in entries:
        name = str(e.get("name", ""))
        names = [name] + [str(a) for a in e.get("aliases", [])]
        model = name.split()[0].upper() if name else ""
        if not model or model not in words:
            continue
        score = max(len(_tokens(n) & words) for n in names) + 1
        if score > best_score:
            best, best_score = e, score
    if best is None:
        return None
    peak = best.get("peak_tflops", {}) or {}
    tensor = peak.get("bf16") or peak.get("fp16")
    fp32 = peak.get("fp32")
    bw = best.get("memory_bandwidth_gbs")
    return Peaks(str(best.get("name")), tensor * 1e12 if tensor else None,
                 fp32 * 1e12 if fp32 else None, bw * 1e9 if bw else None)
