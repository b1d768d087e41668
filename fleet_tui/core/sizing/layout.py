"""The parallel layout a workload runs on: tensor × pipeline × data parallel and the ZeRO stage.

A workload that sets ``tp``/``pp``/``zero`` keeps its layout. Otherwise :func:`choose_layout`
searches the layouts of ``gpus`` devices and takes the **cheapest one that fits**: candidates are
tried in order of what their communication costs (:func:`candidate_layouts`) and, among the first
few that fit, the fastest on the offer's links wins (:mod:`fleet_tui.core.perf.collectives`):

* training: plain data parallel (DDP), ZeRO-1, ZeRO-2, FSDP (ZeRO-3); the same with micro-batches
  of one sequence (gradient accumulation, same global batch); then tensor parallel inside a node
  (2, 4, 8 … up to the node's devices) with ZeRO-1 or FSDP over the replicas; then the widest
  in-node TP × pipeline stages (2, 4, 8 …) across nodes, micro-batches of one sequence;
* inference: independent replicas, then tensor parallel inside a node, then TP × pipeline stages.

Tensor-parallel sizes divide the attention heads; pipeline stages never exceed the layers;
data-parallel ranks never exceed global batch / micro-batch (the rest are idle, and said so).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from fleet_tui.core import caches
from fleet_tui.core.footprint import Layout, parallel_layout
from fleet_tui.core.interconnects import default_fabric
from fleet_tui.core.perf import estimate_throughput
from fleet_tui.core.sizing.capacity import capacity_bytes, precision_support
from fleet_tui.core.sizing.memory import estimate_memory
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload

#: Largest tensor-parallel group tried: beyond 8 ranks each GEMM shrinks below efficient sizes,
#: and practice stops there (Megatron-LM keeps TP inside an 8-GPU NVLink node; Llama 3 405B was
#: trained with TP 8, arXiv:2407.21783 §3.3). Larger models add pipeline stages instead.
MAX_TP = 8
#: Fitting layouts compared by speed before the search stops (the rest cost more communication).
COMPARED_FITS = 3


@dataclass(frozen=True, slots=True)
class LayoutChoice:
    workload: Workload  # the workload with its layout set (tp, pp, zero, micro_batch)
    gpus: int
    layout: Layout
    fits: bool
    total_bytes: int  # memory per device
    searched: bool  # False when the workload's own layout was kept

    @property
    def label(self) -> str:
        return self.layout.label()


def layout_is_set(w: Workload) -> bool:
    return w.tp is not None or w.pp is not None or w.zero is not None


def _powers(limit: int) -> Iterator[int]:
    n = 2
    while n <= limit:
        yield n
        n *= 2


def candidate_layouts(w: Workload, gpus: int, node_devices: int) -> Iterator[Workload]:
    """Layouts of ``gpus`` devices for ``w``, cheapest communication first (see the module doc)."""
    if gpus <= 1:
        yield w.derive(gpus=1, tp=None, pp=None, zero=None, micro_batch=None, sharding="data")
        return
    arch = w.arch
    base = dict(gpus=gpus, micro_batch=None)
    tps = [t for t in _powers(min(node_devices, gpus, MAX_TP)) if arch.heads % t == 0 and gpus % t == 0]
    if w.is_training:
        one = 1 if w.batch > 1 else None
        for zero in (0, 1, 2, 3):
            yield w.derive(**base, tp=1, pp=1, zero=zero, sharding="fsdp" if zero == 3 else "data")
        if one:
            for zero in (1, 3):
                yield w.derive(**{**base, "micro_batch": one}, tp=1, pp=1, zero=zero,
                               sharding="fsdp" if zero == 3 else "data")
        for t in tps:
            for zero in (1, 3):
                yield w.derive(**{**base, "micro_batch": one}, tp=t, pp=1, zero=zero,
                               sharding="fsdp" if zero == 3 else "tensor")
        t = tps[-1] if tps else 1
        for p in _powers(min(arch.layers, gpus // t)):
            if gpus % (t * p) == 0:
                for zero in (1, 3):
                    yield w.derive(**{**base, "micro_batch": one}, tp=t, pp=p, zero=zero,
                                   sharding="fsdp" if zero == 3 else "tensor")
    else:
        yield w.derive(**base, tp=1, pp=1, zero=0, sharding="data")
        for t in tps:
            yield w.derive(**base, tp=t, pp=1, zero=0, sharding="tensor")
        t = tps[-1] if tps else 1
        for p in _powers(min(arch.layers, gpus // t)):
            if gpus % (t * p) == 0:
                yield w.derive(**base, tp=t, pp=p, zero=0, sharding="tensor")


_CHOICES = caches.memo("sizing.layout", 4096)


def choose_layout(w: Workload, acc: Accelerator, gpus: int, node_devices: int = 8,
                  speed=None) -> LayoutChoice:
    """The cheapest layout of ``gpus`` × ``acc`` that fits ``w`` (or, when none fits, the one that
    comes closest). ``speed(workload) -> tokens/s or None`` ranks the first fitting layouts (the
    caller passes one that knows the offer's links); without it the first that fits wins."""
    n = max(1, int(gpus))
    if layout_is_set(w):
        mem = estimate_memory(w, n).total_bytes
        return LayoutChoice(w, n, parallel_layout(w, n), mem <= capacity_bytes(acc), mem, False)
    key = (w, caches.ValueKey(acc, acc.id), n, node_devices, speed is not None)
    if speed is None:
        return _CHOICES.get_or_compute(key, lambda: _search(w, acc, n, node_devices, None))
    return _search(w, acc, n, node_devices, speed)


def _search(w: Workload, acc: Accelerator, n: int, node_devices: int, speed) -> LayoutChoice:
    cap = capacity_bytes(acc)
    ok_precision = precision_support(w.precision, acc)[0]
    fitting: list[LayoutChoice] = []
    closest: LayoutChoice | None = None
    for v in candidate_layouts(w, n, node_devices):
        try:
            mem = estimate_memory(v, n).total_bytes
        except ValueError:
            continue
        choice = LayoutChoice(v, n, parallel_layout(v, n), ok_precision and mem <= cap, mem, True)
        if choice.fits:
            fitting.append(choice)
            busy = [c for c in fitting if not c.layout.idle]
            if busy and (speed is None or len(busy) >= COMPARED_FITS):
                break
        elif closest is None or mem < closest.total_bytes:
            closest = choice
    if not fitting:
        assert closest is not None
        return closest
    # devices left idle (a batch too small for the data-parallel ranks) are the last resort
    fewest_idle = min(c.layout.idle for c in fitting)
    fitting = [c for c in fitting if c.layout.idle == fewest_idle]
    if speed is None or len(fitting) == 1:
        return fitting[0]
    rated = [(speed(c.workload) or 0.0, -i, c) for i, c in enumerate(fitting)]
    return max(rated, key=lambda r: (r[0], r[1]))[2]


def auto_layout(w: Workload, acc: Accelerator, gpus: int | None = None, fabric=None) -> Workload:
    """``w`` with the cheapest layout that fits ``gpus`` × ``acc`` (fastest of the first few on
    ``fabric``, default: the device's own link in nodes of 8 and an unknown network between them);
    ``w`` unchanged when it sets its own layout, runs on one device, or nothing fits."""
    n = int(gpus or w.gpus)
    if n <= 1 or layout_is_set(w):
        return w
    fab = fabric or default_fabric(acc.id, acc.software_stack)
    node = min(n, fab.node_devices)

    def speed(v: Workload) -> float | None:
        return estimate_throughput(v, acc, n, fab).tokens_per_s

    ch = choose_layout(w, acc, n, node, speed=speed)
    return ch.workload if ch.fits else w
