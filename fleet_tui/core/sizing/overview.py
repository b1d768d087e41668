"""Everything about one workload at once: memory, fit, serving KV capacity and speed."""

from __future__ import annotations

from fleet_tui.core import caches
from fleet_tui.core.interconnects import Fabric
from fleet_tui.core.perf import Throughput, estimate_throughput
from fleet_tui.core.records import record
from fleet_tui.core.sizing.fit import FitResult, check_fit
from fleet_tui.core.sizing.kv_pool import KVCapacity, kv_capacity
from fleet_tui.core.sizing.memory import MemoryBreakdown, estimate_memory
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


@record
class SizingResult:
    workload: Workload
    memory: MemoryBreakdown
    fit: FitResult | None
    kv_capacity: KVCapacity | None
    throughput: Throughput | None
    accelerator: str | None = None
    gpus: int = 1


_SIZED = caches.memo("sizing.size_workload", 8192)


def size_workload(workload: Workload, accelerator: Accelerator | None = None,
                  gpus: int | None = None, fabric: Fabric | None = None) -> SizingResult:
    """Memory, fit (None without an accelerator), serving KV capacity and speed of ``workload``.

    Cached per (workload, accelerator, gpus): cheap to call for every offer of a catalog.
    """
    n = int(gpus or workload.gpus)
    # Keyed by the device's id and checked by value on a hit: building a caches.ValueKey on this,
    # the hottest cached path, made a hit 1.28 µs instead of 0.93 (bench/bench_sizing.py).
    key = (workload, accelerator.id if accelerator is not None else None, n, fabric)
    device, result = _SIZED.get_or_compute(key, lambda: (accelerator, _size(workload, accelerator, n, fabric)))
    if device is accelerator or device == accelerator:
        return result
    return _size(workload, accelerator, n, fabric)  # another spec under the same id (a user's own): not cached


def _size(workload: Workload, accelerator: Accelerator | None, n: int, fabric: Fabric | None) -> SizingResult:
    mem = estimate_memory(workload, n)
    fit = kv = thr = None
    if accelerator is not None:
        fit = check_fit(workload, accelerator, n)
        if not workload.is_training:
            kv = kv_capacity(workload, accelerator, n)
        if fit.fits:  # nothing that does not fit gets a speed
            thr = estimate_throughput(workload, accelerator, n, fabric)
    return SizingResult(workload=workload, memory=mem, fit=fit, kv_capacity=kv, throughput=thr,
                        accelerator=accelerator.id if accelerator is not None else None, gpus=n)
