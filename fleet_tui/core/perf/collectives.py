"""Communication of a parallel layout, charged on the link each collective crosses.

A layout (:class:`fleet_tui.core.footprint.Layout`) places tensor-parallel ranks innermost
(neighbouring devices), pipeline stages next, data-parallel replicas outermost — Megatron's order
(Narayanan et al., arXiv:2104.04473). A group of ``n`` ranks ``stride`` devices apart stays inside
one node when ``n × stride`` ≤ the node's devices and then uses the intra-node link (NVLink,
NVSwitch, Infinity Fabric, ICI, NeuronLink, PCIe); otherwise every rank's share of the node's
network (EFA, InfiniBand, RoCE, Ethernet) is the bottleneck. Links come from
:mod:`fleet_tui.core.interconnects` (``catalogs/interconnects.toml``; unknown = assumed slow).

Collective costs (ring algorithms, Thakur et al. 2005; NCCL's "bus bandwidth" convention): an
all-reduce of ``S`` bytes over ``n`` ranks moves ``2(n−1)/n · S`` per rank, an all-gather or a
reduce-scatter ``(n−1)/n · S``; each step pays a latency. What one training step pays:

* **TP** (Megatron): 2 all-reduces of the micro-batch's activations per layer forward, 2 backward
  (+2 when the layer is recomputed), never overlapped with compute;
* **PP**: activations sent between stages each micro-batch; the 1F1B **bubble** stretches compute by
  ``(m + pp − 1)/m`` for ``m`` micro-batches per step (bubble fraction ``(pp−1)/(m+pp−1)``);
* **DP**: gradient all-reduce (ZeRO 0/1) or reduce-scatter (ZeRO 2) of the trainable parameters;
  ZeRO-3/FSDP also all-gathers the 16-bit weights for forward and backward. It overlaps with
  backward (about two thirds of the step's compute); only what sticks out is charged. The
  synchronisation that remains at scale (stragglers, launch skew) is the measured per-doubling
  efficiency of :data:`calibration.SCALING_PER_DOUBLING` over the data-parallel ranks.

Decode with TP pays 2 latency-bound all-reduces per layer per token.

Constants below are stated assumptions (not measurements): the share of a link's datasheet
bandwidth that NCCL-class collectives reach (:data:`LINK_EFFICIENCY`) and per-step latencies.
"""

from __future__ import annotations

import math

from fleet_tui.core import calibration as cal
from fleet_tui.core.footprint import Layout, activation_bytes, lora_params, weight_bytes
from fleet_tui.core.interconnects import Fabric
from fleet_tui.core.modelspec import ParamCounts
from fleet_tui.core.records import record
from fleet_tui.core.workload import DEFAULT_TRAIN_SEQ_LEN, Workload

#: Share of a link's one-direction datasheet bandwidth a ring collective reaches (assumed: NCCL's
#: all-reduce bus bandwidth on 8×H100 NVSwitch is commonly reported near 80 % of 450 GB/s).
LINK_EFFICIENCY = 0.8
#: Latency of an all-reduce per doubling of its ranks (an all-gather pays half): inside a node (calibrated for decode all-reduces, see
#: calibration.TP_ALLREDUCE_S_PER_DOUBLING); across a known RDMA network (assumed); across an
#: unknown network (assumed TCP-class).
LATENCY_INTRA_S = cal.TP_ALLREDUCE_S_PER_DOUBLING
LATENCY_NETWORK_S = 15e-6
LATENCY_UNKNOWN_S = 50e-6
#: Share of a training step's compute that data-parallel communication can hide behind (backward).
OVERLAP_FRACTION = 2 / 3


@record
class Link:
    bytes_per_s: float  # one direction, per rank, at LINK_EFFICIENCY
    latency_s: float
    name: str
    crosses_nodes: bool


def link_for(fabric: Fabric, ranks: int, stride: int) -> Link:
    """The link a group of ``ranks`` ranks ``stride`` devices apart talks over."""
    if ranks * stride <= fabric.node_devices:
        return Link(fabric.intra_gbs / 2 * 1e9 * LINK_EFFICIENCY, LATENCY_INTRA_S, fabric.intra_link, False)
    per_device = fabric.inter_gbps / 8 * 1e9 / max(1, fabric.node_devices)
    intra = fabric.intra_gbs / 2 * 1e9
    latency = LATENCY_NETWORK_S if fabric.inter_known else LATENCY_UNKNOWN_S
    name = fabric.inter_link if fabric.inter_known else "unknown network"
    return Link(min(per_device, intra) * LINK_EFFICIENCY, latency, name, True)


def all_reduce_s(size: float, ranks: int, link: Link) -> float:
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * size / link.bytes_per_s + math.ceil(math.log2(ranks)) * link.latency_s


def all_gather_s(size: float, ranks: int, link: Link) -> float:
    """All-gather (or reduce-scatter) of ``size`` bytes in total."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) / ranks * size / link.bytes_per_s + math.ceil(math.log2(ranks)) * link.latency_s / 2


@record
class ParallelStep:
    """One training step of the global batch on a layout."""

    seconds: float
    compute_s: float  # per rank, with the pipeline bubble
    tp_s: float
    pp_s: float
    dp_s: float  # data-parallel communication in total (exposed part: ``dp_exposed_s``)
    dp_exposed_s: float
    bubble: float  # fraction of the pipeline idle
    notes: tuple[str, ...]


def training_step(w: Workload, pc: ParamCounts, lay: Layout, fabric: Fabric,
                  single_device_s: float) -> ParallelStep:
    """Wall time of one step of the global batch: ``single_device_s`` (one device doing the whole
    batch, no communication) split over the layout's busy devices, plus what the links cost."""
    a = w.arch
    seq = w.seq_len or DEFAULT_TRAIN_SEQ_LEN
    act = activation_bytes(w)
    per_rank = math.ceil(w.batch / lay.dp)
    micro = min(lay.micro_batch, per_rank)
    m = math.ceil(per_rank / micro)
    bubble = (lay.pp - 1) / (m + lay.pp - 1)
    compute = single_device_s / lay.devices * (m + lay.pp - 1) / m
    if lay.dp > 1:  # synchronisation and stragglers, measured at scale (calibration.SCALING_PER_DOUBLING)
        compute /= cal.SCALING_PER_DOUBLING["fsdp" if lay.zero >= 3 else "data"] ** math.log2(lay.dp)
    notes: list[str] = []
    msg = micro * seq * a.hidden * act  # one micro-batch's activations at a layer boundary
    tp_s = pp_s = dp_s = 0.0
    if lay.tp > 1:
        link = link_for(fabric, lay.tp, 1)
        per_layer = 6 if w.grad_checkpointing else 4
        tp_s = a.layers / lay.pp * m * per_layer * all_reduce_s(msg, lay.tp, link)
        notes.append(f"TP {lay.tp} over {link.name}: {tp_s * 1e3:.0f} ms per step in all-reduces")
    if lay.pp > 1:
        link = link_for(fabric, lay.pp, lay.tp)
        pp_s = 2 * m * (msg / lay.tp / link.bytes_per_s + link.latency_s)
        notes.append(f"PP {lay.pp}, {m} micro-batches per step: pipeline bubble {bubble:.0%}"
                     + (f"; stages talk over {link.name}" if link.crosses_nodes else ""))
    if lay.dp > 1:
        link = link_for(fabric, lay.dp, lay.tp * lay.pp)
        split = lay.tp * lay.pp
        if w.is_adapter:
            grads = lora_params(a, w) / split * 4.0
        else:
            amp = w.master_weights == "fp32" or w.precision == "fp32"
            grads = pc.total / split * (4.0 if amp else act)
        if lay.zero >= 2:
            dp_s = all_gather_s(grads, lay.dp, link)  # reduce-scatter
        else:
            dp_s = all_reduce_s(grads, lay.dp, link)
        if lay.zero >= 3:  # gather the weights (16-bit, or NF4 for QLoRA) for forward and backward
            stored = weight_bytes(w, pc) if w.kind == "qlora" else pc.total * 2.0
            dp_s += 2 * all_gather_s(stored / split, lay.dp, link)
        what = "FSDP gathers and gradient reduce-scatter" if lay.zero >= 3 else "gradient all-reduce"
        notes.append(f"DP {lay.dp} over {link.name}: {what} {dp_s * 1e3:.0f} ms per step")
    exposed = max(0.0, dp_s - OVERLAP_FRACTION * compute)
    seconds = compute + tp_s + pp_s + exposed
    if lay.idle:
        notes.append(f"{lay.idle} devices idle: global batch {w.batch} / micro-batch {micro} gives at most "
                     f"{lay.dp} data-parallel ranks")
    return ParallelStep(seconds, compute, tp_s, pp_s, dp_s, exposed, bubble, tuple(notes))


def decode_sync_s(w: Workload, lay: Layout, fabric: Fabric, sequences: int) -> float:
    """Communication per generated token of one replica: TP all-reduces (2 per layer) and the
    activations passed between pipeline stages."""
    a = w.arch
    msg = sequences * a.hidden * activation_bytes(w)
    total = 0.0
    if lay.tp > 1:
        total += 2 * a.layers * all_reduce_s(msg, lay.tp, link_for(fabric, lay.tp, 1))
    if lay.pp > 1:
        link = link_for(fabric, lay.pp, lay.tp)
        total += (lay.pp - 1) * (msg / link.bytes_per_s + link.latency_s)
    return total
