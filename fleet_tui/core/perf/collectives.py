"""Communication of a parallel layout, charged on the link each collective crosses.

A layout (:class:`fleet_tui.core.footprint.Layout`) places tensor-parallel ranks innermost
(neighbouring devices), then context-parallel, data-parallel, and pipeline stages outermost —
Megatron-Core's default order ``tp-cp-dp-pp`` (Narayanan et al., arXiv:2104.04473). A group of
``n`` ranks ``stride`` devices apart stays inside one node when ``n × stride`` ≤ the node's devices
and then uses the intra-node link (NVLink/NVSwitch, Infinity Fabric, ICI, NeuronLink, PCIe).

**Across nodes, collectives are hierarchical.** NCCL runs one ring (channel) per NIC and each GPU
reaches the network through its own NIC (rail-optimised: p5, DGX, ND H100 v5). When ``k`` ranks of
a group share a node, the group's traffic leaves the node over ``k`` NICs at once, so its bus
bandwidth is ``k ×`` one device's share of the node's network, capped by the intra-node link: a
64-GPU FSDP group on 8 × 400 Gbit/s per node reaches 400 GB/s, a data-parallel group with one
rank per node (TP 8 inside) 50 GB/s. (NCCL's all-reduce bus bandwidth across DGX A100 nodes,
8 × 200 Gbit/s, is reported near the node's 200 GB/s of NIC bandwidth.)

Collective costs (ring algorithms, Thakur et al. 2005; NCCL's "bus bandwidth" convention): an
all-reduce of ``S`` bytes over ``n`` ranks moves ``2(n−1)/n · S`` per rank, an all-gather or a
reduce-scatter ``(n−1)/n · S``; each step pays a latency. What one training step pays
(:func:`training_step`), the framework's overlap taken from its preset (:mod:`fleet_tui.core.frameworks`):

* **compute** split over the busy devices, the pipeline **bubble** of interleaved 1F1B stretching
  it by ``1 + (pp − 1)/(vpp · m)`` for ``m`` micro-batches (Narayanan et al. §2.2.2);
* **TP/SP**: per layer 2 all-reduces forward and 2 backward (+2 when the layer is recomputed) of a
  micro-batch's activations — with sequence parallelism all-gathers and reduce-scatters of the same
  volume; the preset's ``tp_overlap`` share is hidden behind GEMMs;
* **CP** (ring attention): ``cp − 1`` hops of each rank's K and V per layer forward, twice that
  backward, hidden behind the attention compute of the same layer;
* **PP**: activations sent between (virtual) stages each micro-batch;
* **FSDP / ZeRO-3**: every micro-batch all-gathers the 16-bit weights for forward and again for
  backward and reduce-scatters the gradients, prefetched behind forward and backward compute;
* **DP (ZeRO 0–2, Megatron's distributed optimizer)**: one gradient all-reduce (or reduce-scatter
  plus the parameter all-gather) per step, in buckets overlapped with the last micro-batch's
  backward; the last bucket is exposed;
* **synchronisation at scale** (stragglers, launch skew): :data:`SYNC_PER_DOUBLING` per doubling of
  the nodes.

Decode with TP pays 2 latency-bound all-reduces per layer per token.

Constants below are stated assumptions (not measurements): the share of a link's datasheet
bandwidth that NCCL-class collectives reach (:data:`LINK_EFFICIENCY`) and per-step latencies.
"""

from __future__ import annotations

import math

from fleet_tui.core import calibration as cal
from fleet_tui.core.footprint import Layout, activation_bytes, lora_params, weight_bytes
from fleet_tui.core.frameworks import FrameworkPreset, preset
from fleet_tui.core.interconnects import Fabric
from fleet_tui.core.modelspec import ParamCounts
from fleet_tui.core.records import record
from fleet_tui.core.workload import DEFAULT_TRAIN_SEQ_LEN, Workload

#: Share of a link's one-direction datasheet bandwidth a ring collective reaches (assumed: NCCL's
#: all-reduce bus bandwidth on 8×H100 NVSwitch is commonly reported near 80 % of 450 GB/s).
LINK_EFFICIENCY = 0.8
#: Latency of an all-reduce per doubling of its ranks (an all-gather pays half): inside a node
#: (calibrated for decode all-reduces, see calibration.TP_ALLREDUCE_S_PER_DOUBLING); across a known
#: RDMA network (assumed); across an unknown network (assumed TCP-class).
LATENCY_INTRA_S = cal.TP_ALLREDUCE_S_PER_DOUBLING
LATENCY_NETWORK_S = 15e-6
LATENCY_UNKNOWN_S = 50e-6
#: Step time kept per doubling of the nodes a job spans (stragglers, launch skew, the slowest
#: rank setting each collective): fitted on the multi-node tune rows of training_speed.toml.
SYNC_PER_DOUBLING = 0.99
#: Gradient bucket whose reduction cannot overlap (PyTorch DDP bucket_cap_mb 25; Megatron-Core
#: buckets of 40M parameters are of the same order).
BUCKET_BYTES = 25 * 2**20


@record
class Link:
    bytes_per_s: float  # one direction, per rank, at LINK_EFFICIENCY
    latency_s: float
    name: str
    crosses_nodes: bool


def link_for(fabric: Fabric, ranks: int, stride: int) -> Link:
    """The link a group of ``ranks`` ranks ``stride`` devices apart talks over: inside one node
    the intra-node link; across nodes the NICs of the group's ranks in one node together (module
    doc: hierarchical, one rail per device), capped by the intra-node link."""
    intra = fabric.intra_gbs / 2 * 1e9  # one direction
    if ranks * stride <= fabric.node_devices:
        return Link(intra * LINK_EFFICIENCY, LATENCY_INTRA_S, fabric.intra_link, False)
    per_device = fabric.inter_gbps / 8 * 1e9 / max(1, fabric.node_devices)
    in_node = max(1, min(ranks, fabric.node_devices // max(1, stride)))
    latency = LATENCY_NETWORK_S if fabric.inter_known else LATENCY_UNKNOWN_S
    name = fabric.inter_link if fabric.inter_known else "unknown network"
    return Link(min(per_device * in_node, intra) * LINK_EFFICIENCY, latency, name, True)


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
    dp_s: float  # data-parallel communication in total
    exposed_s: float  # communication not hidden behind compute (all kinds)
    bubble: float  # fraction of the pipeline idle
    notes: tuple[str, ...]
    cp_s: float = 0.0  # ring-attention K/V passing in total


@record
class _Step:
    """What every parallelism's cost in one step is computed from."""

    w: Workload
    lay: Layout
    fabric: Fabric
    fw: FrameworkPreset  # how much of each collective the framework overlaps
    compute: float  # per rank, with the pipeline bubble
    micro: int  # sequences per micro-batch
    m: int  # micro-batches per step on one rank
    chunks: int  # pipeline chunks per step (micro-batches x interleaved chunks)
    msg: float  # one micro-batch's activations at a layer boundary, bytes
    tokens_rank: float  # one micro-batch's tokens on one rank
    act: float  # bytes per activation value


def training_step(w: Workload, pc: ParamCounts, lay: Layout, fabric: Fabric,
                  single_device_s: float, attention_share: float = 0.0) -> ParallelStep:
    """Wall time of one step of the global batch: ``single_device_s`` (one device doing the whole
    batch, no communication) split over the layout's busy devices, plus what the links cost
    beyond what the framework overlaps (module doc). ``attention_share``: the share of the step's
    FLOPs in attention (what ring attention hides behind)."""
    seq = w.seq_len or DEFAULT_TRAIN_SEQ_LEN
    act = activation_bytes(w)
    per_rank = math.ceil(w.batch / lay.dp)
    micro = min(lay.micro_batch, per_rank)
    m = math.ceil(per_rank / micro)
    chunks = m * lay.vpp
    bubble = (lay.pp - 1) / (chunks + lay.pp - 1) if lay.pp > 1 else 0.0
    compute = single_device_s / lay.devices / (1.0 - bubble)
    nodes = lay.devices / max(1, fabric.node_devices)
    if nodes > 1:  # stragglers and skew, growing with the nodes every collective waits on
        compute /= SYNC_PER_DOUBLING ** math.log2(nodes)
    tokens_rank = micro * seq / lay.cp  # one micro-batch's tokens on one rank
    st = _Step(w=w, lay=lay, fabric=fabric, fw=preset(w.framework), compute=compute, micro=micro, m=m,
               chunks=chunks, msg=tokens_rank * w.arch.hidden * act, tokens_rank=tokens_rank, act=act)
    notes: list[str] = []
    tp_s = cp_s = pp_s = dp_s = exposed = 0.0
    if lay.tp > 1:
        tp_s, shown, note = _tensor_parallel(st)
        exposed += shown
        notes.append(note)
    if lay.cp > 1:
        cp_s, shown, note = _context_parallel(st, attention_share)
        exposed += shown
        notes.append(note)
    if lay.pp > 1:
        pp_s, shown, note = _pipeline_parallel(st, bubble)
        exposed += shown
        notes.append(note)
    if lay.dp * lay.cp > 1:  # gradients are reduced over data- and context-parallel ranks
        dp_s, shown, note = _data_parallel(st, pc)
        exposed += shown
        notes.append(note)
    seconds = compute + exposed
    if lay.idle:
        notes.append(f"{lay.idle} devices idle: global batch {w.batch} / micro-batch {micro} gives at most "
                     f"{lay.dp} data-parallel ranks")
    return ParallelStep(seconds, compute, tp_s, pp_s, dp_s, exposed, bubble, tuple(notes), cp_s)


def _fwd_bwd(st: _Step) -> tuple[float, float]:
    """The step's forward and backward compute (full recompute: the forward is 1 of 4, else 1 of 3)."""
    fwd_share = 1 / 4 if st.w.grad_checkpointing else 1 / 3
    return st.compute * fwd_share, st.compute * (1 - fwd_share)


def _tensor_parallel(st: _Step) -> tuple[float, float, str]:
    """(seconds, exposed seconds, note) of the TP collectives: 4 per layer and micro-batch, 6 with recompute."""
    w, lay, fw = st.w, st.lay, st.fw
    link = link_for(st.fabric, lay.tp, 1)
    per_layer = 6 if w.grad_checkpointing else 4
    tp_s = w.arch.layers / lay.pp * st.m * per_layer * all_reduce_s(st.msg, lay.tp, link)
    hidden = fw.tp_overlap * tp_s
    kind = "all-gathers/reduce-scatters (sequence parallel)" if w.sequence_parallel else "all-reduces"
    return tp_s, tp_s - hidden, (f"TP {lay.tp} over {link.name}: {tp_s * 1e3:.0f} ms per step in {kind}"
                                 + (f", {fw.tp_overlap:.0%} overlapped with GEMMs" if fw.tp_overlap else ""))


def _context_parallel(st: _Step, attention_share: float) -> tuple[float, float, str]:
    """(seconds, exposed seconds, note) of ring attention's K/V passing, hidden behind attention."""
    a, lay = st.w.arch, st.lay
    link = link_for(st.fabric, lay.cp, lay.tp)
    kv = st.tokens_rank * a.kv_dim * 2 * st.act / lay.tp  # this rank's K and V chunk (TP splits heads)
    hop = kv / link.bytes_per_s + link.latency_s
    cp_s = (a.kv_layers or a.layers) / lay.pp * st.m * 3 * (lay.cp - 1) * hop  # fwd 1×, bwd 2× (dK, dV)
    cp_exposed = max(0.0, cp_s - attention_share * st.compute)
    return cp_s, cp_exposed, (f"CP {lay.cp} (ring attention) over {link.name}: {cp_s * 1e3:.0f} ms per step "
                              f"passing K/V, {cp_exposed * 1e3:.0f} ms not hidden behind attention")


def _pipeline_parallel(st: _Step, bubble: float) -> tuple[float, float, str]:
    """(seconds, exposed seconds, note) of the stage hand-offs."""
    lay = st.lay
    link = link_for(st.fabric, lay.pp, lay.tp * lay.cp * lay.dp)
    # each TP rank sends its 1/tp slice (Megatron's scatter/gather of stage hand-offs, §4.1)
    send = st.msg / lay.tp
    hop = send / link.bytes_per_s + link.latency_s
    pp_s = 2 * st.chunks * hop
    # sends of the interleaved chunks run while the next chunk computes (Megatron
    # overlap_p2p_comm); one hand-off forward and one backward per micro-batch stays exposed
    return pp_s, 2 * st.m * hop, (f"PP {lay.pp}" + (f" × {lay.vpp} interleaved chunks" if lay.vpp > 1 else "")
                                  + f", {st.m} micro-batches per step: pipeline bubble {bubble:.0%}"
                                  + (f"; stages talk over {link.name}" if link.crosses_nodes else ""))


def _data_parallel(st: _Step, pc: ParamCounts) -> tuple[float, float, str]:
    """(seconds, exposed seconds, note) of the gradient reduction over the data- and context-parallel
    ranks: FSDP's gathers per micro-batch, or ZeRO/DDP's reduction once per step in buckets."""
    w, lay, fw, a, m = st.w, st.lay, st.fw, st.w.arch, st.m
    fwd_c, bwd_c = _fwd_bwd(st)
    ranks = lay.dp * lay.cp
    link = link_for(st.fabric, ranks, lay.tp)
    split = lay.tp * lay.pp
    if w.is_adapter:
        grads = lora_params(a, w) / split * 4.0
    else:
        wide = w.master_weights == "fp32" or w.precision == "fp32"  # fp32 reduce (AMP, FSDP reduce_dtype)
        grads = pc.total / split * (4.0 if wide else st.act)
    if lay.zero >= 3:  # FSDP: per micro-batch, gather for forward and backward, reduce-scatter
        stored = weight_bytes(w, pc) if w.kind == "qlora" else pc.total * 2.0
        gather = all_gather_s(stored / split, ranks, link)
        rs = 0.0 if w.is_adapter else all_gather_s(grads, ranks, link)
        dp_s = m * (2 * gather + rs)
        # the first unit's gather and the last unit's reduce-scatter have nothing to hide behind
        edges = m * (gather + rs) / max(1, a.layers // lay.pp)
        dp_exposed = (edges + max(0.0, m * gather - fw.dp_overlap * fwd_c)
                      + max(0.0, m * (gather + rs) - fw.dp_overlap * bwd_c))
        what = "FSDP gathers and gradient reduce-scatters"
    else:  # once per step, in buckets behind the last micro-batch's backward
        if lay.zero >= 1:  # reduce-scatter, then the updated 16-bit parameters all-gathered
            dp_s = all_gather_s(grads, ranks, link) + all_gather_s(pc.total / split * 2.0, ranks, link)
        else:
            dp_s = all_reduce_s(grads, ranks, link)
        tail = min(dp_s, BUCKET_BYTES / link.bytes_per_s)
        dp_exposed = tail + max(0.0, dp_s - tail - fw.dp_overlap * (bwd_c / m + fwd_c / m))
        what = "gradient reduce-scatter + parameter all-gather" if lay.zero >= 1 else "gradient all-reduce"
    return dp_s, dp_exposed, (f"DP {ranks} over {link.name}: {what} {dp_s * 1e3:.0f} ms per step, "
                              f"{dp_exposed * 1e3:.0f} ms not overlapped")


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
