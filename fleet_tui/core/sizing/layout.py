"""The parallel layout a workload runs on: tensor × pipeline × data parallel and the ZeRO stage.

A workload that sets ``tp``/``pp``/``zero`` keeps its layout. Otherwise :func:`choose_layout`
searches the layouts of ``gpus`` devices and takes the **cheapest one that fits**: candidates are
tried in order of what their communication costs (:func:`candidate_layouts`) and, among the first
few that fit, the fastest on the offer's links wins (:mod:`fleet_tui.core.perf.collectives`):

* training: plain data parallel (DDP), ZeRO-1, ZeRO-2, FSDP (ZeRO-3); the same with micro-batches
  of one sequence (gradient accumulation, same global batch); then tensor parallel inside a node
  (2, 4, 8 … up to the node's devices) with ZeRO-1 or FSDP over the replicas; then the widest
  in-node TP × pipeline stages (2, 4, 8 …) across nodes, micro-batches of one sequence;
* inference: the widest tensor-parallel group inside a node (decode at a given number of
  concurrent sequences streams the weights once per replica per step, so splitting wider is both
  faster and smaller) with replicas over the rest, then TP × pipeline stages across nodes.

Tensor-parallel sizes divide the attention heads; pipeline stages never exceed the layers;
data-parallel ranks never exceed global batch / micro-batch (the rest are idle, and said so).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from fleet_tui.core import caches
from fleet_tui.core.footprint import Layout, layout_is_set, make_layout, parallel_layout, weight_bytes
from fleet_tui.core.interconnects import default_fabric
from fleet_tui.core.modelspec import param_counts
from fleet_tui.core.perf import estimate_throughput
from fleet_tui.core.records import record
from fleet_tui.core.sizing.device_support import capacity_bytes, precision_support
from fleet_tui.core.sizing.memory import estimate_memory
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload

#: Largest tensor-parallel group tried: beyond 8 ranks each GEMM shrinks below efficient sizes,
#: and practice stops there (Megatron-LM keeps TP inside an 8-GPU NVLink node; Llama 3 405B was
#: trained with TP 8, arXiv:2407.21783 §3.3). Larger models add pipeline stages instead.
MAX_TP = 8
#: Layouts looked at past a fit that leaves devices idle, for one that keeps them all busy.
IDLE_LOOKAHEAD = 3
#: Fitting layouts compared by speed before the search stops (the rest cost more communication).
COMPARED_FITS = 3


@record
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


def _powers(limit: int) -> Iterator[int]:
    n = 2
    while n <= limit:
        yield n
        n *= 2


#: ZeRO stages a framework's data-parallel ranks run (None: any): FSDP2 full shard for torchtune,
#: torchtitan and MaxText; Megatron-Core's distributed optimizer (ZeRO-1) for Megatron, NeMo, NeuronX.
FRAMEWORK_ZERO: dict[str, tuple[int, ...]] = {
    "torchtune": (3,), "torchtitan": (3,), "maxtext": (3,),
    "megatron": (1,), "nemo": (1,), "neuronx": (1,),
}
#: Frameworks without tensor/pipeline parallel recipes (their distributed recipes are FSDP only).
NO_MODEL_PARALLEL = ("torchtune", "unsloth")
#: Sequence length from which context parallel is tried (ring attention pays off on long
#: sequences: NeMo uses CP 2 at 8k for 70B, torchtitan from 32k, Llama 3 CP 16 at 128k).
CP_MIN_SEQ = 16384


def candidate_changes(w: Workload, gpus: int, node_devices: int) -> Iterator[dict]:
    """Layouts of ``gpus`` devices for ``w`` as field changes, cheapest communication first (see
    the module doc), limited to what the workload's framework runs (:data:`FRAMEWORK_ZERO`)."""
    if gpus <= 1:
        yield dict(gpus=1, tp=None, pp=None, zero=None, micro_batch=None, sharding="data", cp=1, vpp=1)
        return
    arch = w.arch
    tps = [t for t in _powers(min(node_devices, gpus, MAX_TP)) if arch.heads % t == 0 and gpus % t == 0]
    if w.is_training:
        zeros = FRAMEWORK_ZERO.get(w.framework, (0, 1, 2, 3))
        if w.framework in NO_MODEL_PARALLEL:
            tps = []
        one = 1 if w.batch > 1 else None

        def change(tp: int, pp: int, zero: int, micro: int | None, cp: int = 1, vpp: int = 1) -> dict:
            sharding = "fsdp" if zero == 3 else ("tensor" if tp > 1 else "data")
            return dict(gpus=gpus, micro_batch=micro, tp=tp, pp=pp, zero=zero, sharding=sharding, cp=cp, vpp=vpp)

        for zero in zeros:
            yield change(1, 1, zero, None)
        if one:
            for zero in (z for z in (1, 3) if z in zeros):
                yield change(1, 1, zero, one)
        seq = w.seq_len or 0
        for t in tps:
            for zero in (z for z in (1, 3) if z in zeros):
                yield change(t, 1, zero, one)
        if seq >= CP_MIN_SEQ:  # long sequences: split each over CP ranks, TP inside the node
            t = tps[-1] if tps else 1
            for c in _powers(min(8, gpus // t)):
                if gpus % (t * c) == 0 and seq % (2 * c) == 0:
                    for zero in (z for z in (1, 3) if z in zeros):
                        yield change(t, 1, zero, one, cp=c)
        if w.framework in NO_MODEL_PARALLEL:
            return
        t = tps[-1] if tps else 1
        for p in _powers(min(arch.layers, gpus // t)):
            if gpus % (t * p) == 0:
                # interleaved stages where the layers split evenly (a smaller bubble, Megatron's default)
                v = 2 if arch.layers % (2 * p) == 0 and arch.layers >= 4 * p else 1
                for zero in (z for z in (1, 3) if z in zeros):
                    yield change(t, p, zero, one, vpp=v)
    else:
        # decode at a fixed number of concurrent sequences streams the weights once per step per
        # replica: the widest tensor-parallel group inside a node is the fastest and the smallest
        t = tps[-1] if tps else 1
        yield dict(gpus=gpus, micro_batch=None, tp=t, pp=1, zero=0, sharding="tensor" if t > 1 else "data")
        for p in _powers(min(arch.layers, gpus // t)):
            if gpus % (t * p) == 0:
                yield dict(gpus=gpus, micro_batch=None, tp=t, pp=p, zero=0, sharding="tensor")


def candidate_layouts(w: Workload, gpus: int, node_devices: int) -> Iterator[Workload]:
    """:func:`candidate_changes` applied to ``w``."""
    for change in candidate_changes(w, gpus, node_devices):
        yield w.derive(**change)


class _Rung:
    """One candidate layout; the workload variant is built and its memory estimated only when a
    device could hold it (its floor leaves room)."""

    __slots__ = ("base", "change", "layout", "floor", "_variant", "_mem", "n")

    def __init__(self, base: Workload, change: dict, layout: Layout, floor: float, n: int) -> None:
        self.base, self.change, self.layout, self.floor, self.n = base, change, layout, floor, n
        self._variant: Workload | None = None
        self._mem: int | None = None

    @property
    def variant(self) -> Workload:
        if self._variant is None:
            self._variant = self.base.derive(**self.change)
        return self._variant

    @property
    def mem(self) -> int:
        if self._mem is None:
            self._mem = estimate_memory(self.variant, self.n).total_bytes
        return self._mem

    def choice(self, fits: bool) -> LayoutChoice:
        return LayoutChoice(self.variant, self.n, self.layout, fits, self.mem, True)


class _Ladder:
    """The candidate layouts of one (workload, devices, node size), built in order only as far as
    a query needs. Memory does not depend on the device, so every accelerator with this many
    devices reads the same ladder, and a rung's memory is estimated once, and only when its
    floor — the stored weights alone on one device (``footprint.weight_bytes`` split by the
    layout) — leaves room on the device asked about (bench/bench_recommend.py: first rankings)."""

    def __init__(self, w: Workload, n: int, node: int) -> None:
        self._gen = candidate_changes(w, n, node)
        self._w = w
        self._weights = weight_bytes(w, param_counts(w.arch))
        self.n = n
        self.rungs: list[_Rung] = []
        self.done = False
        # A ladder is cached and shared: the Workload pane's sizing and the Recommendations
        # pane's ranking run in worker threads and can climb the same one at once. Two threads
        # resuming the one generator raise "generator already executing" (seen as "internal error
        # while ranking" in the tmux test), and two appends could swap the order of rungs.
        self._lock = threading.Lock()

    def rung(self, i: int) -> _Rung | None:
        """The ``i``-th rung, climbing the ladder as far as that (None past the top)."""
        rungs = self.rungs
        if i < len(rungs):
            return rungs[i]
        w = self._w
        with self._lock:
            while i >= len(rungs) and not self.done:
                c = next(self._gen, None)
                if c is None:
                    self.done = True
                    break
                lay = make_layout(self.n, c["tp"] or 1, c["pp"] or 1, c["zero"] or 0, c["micro_batch"], w.batch,
                                  w.is_training, c.get("cp", 1), c.get("vpp", 1))
                rungs.append(_Rung(w, c, lay, self._weights / (lay.model_split * lay.weight_shards), self.n))
            return rungs[i] if i < len(rungs) else None

    def first_fit(self, cap: int) -> LayoutChoice | None:
        """The first layout within ``cap`` bytes that leaves no device idle (else, after a few
        more, the first with the fewest idle), or None."""
        i = 0
        best: _Rung | None = None
        after_best = 0  # rungs looked at since the first fit that leaves devices idle
        while (r := self.rung(i)) is not None:
            i += 1
            if best is not None:
                after_best += 1
                if after_best > IDLE_LOOKAHEAD:
                    return best.choice(True)
            if r.floor <= cap and r.mem <= cap:
                if not r.layout.idle:
                    return r.choice(True)
                if best is None or r.layout.idle < best.layout.idle:
                    best = r
        return None if best is None else best.choice(True)

    def closest(self, exact: bool = True) -> LayoutChoice:
        """The layout needing the least memory per device (``exact`` False: the one with the
        smallest floor, its memory estimated alone)."""
        i = 0
        while self.rung(i) is not None:  # the whole ladder (then nothing is added to it)
            i += 1
        if exact:
            return min(self.rungs, key=lambda r: r.mem).choice(False)
        return min(self.rungs, key=lambda r: r.floor).choice(False)


_LADDERS = caches.memo("sizing.layout_ladders", 1024)


def choose_layout(w: Workload, acc: Accelerator, gpus: int, node_devices: int = 8,
                  speed=None, exact_closest: bool = True) -> LayoutChoice:
    """The cheapest layout of ``gpus`` × ``acc`` that fits ``w`` (or, when none fits, the one that
    comes closest). ``speed(workload) -> tokens/s or None`` ranks the first fitting layouts (the
    caller passes one that knows the offer's links); without it the first that fits wins."""
    n = max(1, int(gpus))
    if layout_is_set(w):
        split = (w.tp or 1) * (w.pp or 1)
        mem = estimate_memory(w, n).total_bytes
        possible = split <= n and n % split == 0  # the user's TP × PP must tile these devices
        return LayoutChoice(w, n, parallel_layout(w, n), possible and mem <= capacity_bytes(acc), mem, False)
    if speed is None:
        ladder = _LADDERS.get_or_compute((w, n, node_devices), lambda: _Ladder(w, n, node_devices))
        if not precision_support(w.precision, acc, w)[0]:
            return ladder.closest(exact_closest)
        return ladder.first_fit(capacity_bytes(acc)) or ladder.closest(exact_closest)
    return _search(w, acc, n, node_devices, speed)


def _search(w: Workload, acc: Accelerator, n: int, node_devices: int, speed) -> LayoutChoice:
    """The first few fitting layouts (busy devices first) compared by ``speed``; the fastest wins."""
    ladder = _LADDERS.get_or_compute((w, n, node_devices), lambda: _Ladder(w, n, node_devices))
    if not precision_support(w.precision, acc, w)[0]:
        return ladder.closest()
    cap = capacity_bytes(acc)
    fitting: list[LayoutChoice] = []
    busy = 0  # fitting layouts that leave no device idle
    i = 0
    while busy < COMPARED_FITS and (r := ladder.rung(i)) is not None:
        i += 1
        if r.floor <= cap and r.mem <= cap:
            fitting.append(r.choice(True))
            busy += not r.layout.idle
    if not fitting:
        return ladder.closest()
    fewest_idle = min(c.layout.idle for c in fitting)
    fitting = [c for c in fitting if c.layout.idle == fewest_idle]
    if len(fitting) == 1:
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
