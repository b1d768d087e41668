"""Every diagnosis kind, declared once: its role, severity, action and the rule that finds it.

Adding a rule is one function ``(WindowStats) -> Finding | None`` (in ``rules/``) plus one line
here. ``KINDS``, ``ROLES``, ``PRIORITY``, ``SEVERITY`` and ``ACTIONS`` are read from this table.

How ``primary`` is chosen (``analyze.rank``): among the **bottlenecks** (what limits the work now)
the one with the strongest evidence (confidence); a **risk** (growth, capacity, ECC/XID, heat)
outranks it only when critical (severity) or urgent (the rule says it cannot wait: memory full
within minutes, at the slowdown temperature). ``priority`` orders risks among themselves and breaks
ties; it never puts a weak finding above a strong one. Growth ranks above capacity: "out of memory
in 0.4 s at +13 GB/s" says more than "96 % in use" of the same device.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.rules import activity, alarms, clocks, compute, contention, memory
from fleet_tui.core.monitor.analysis.window import WindowStats
from fleet_tui.core.records import record


@record
class Rule:
    """One diagnosis kind. ``role``: "bottleneck", "risk" or "note" (see ``Diagnosis``).
    ``priority`` orders risks and breaks ties (see the module doc)."""

    kind: str
    priority: int
    severity: str  # ok | info | warning | critical
    action: str  # what to do about it
    rule: Callable[[WindowStats], Finding | None] | None  # None: given by the analysis itself
    # which windows the rule can fire on: "alarm" (windows with a lost state, XIDs or
    # uncorrectable ECC errors, even of a device that stopped answering), "any" (every live
    # device), "idle" / "active" (``Activity.state``). The driver skips the rule on other windows;
    # the rule still checks its own conditions.
    when: str = "any"
    role: str = "bottleneck"


_RULES = (
    Rule("device_lost", 100, "critical",
         "The GPU stopped answering (fell off the bus): drain the node and reset or replace the "
         "GPU.", alarms.device_lost, "alarm", "risk"),
    Rule("xid", 95, "critical",
         "The driver reported XID errors: read the codes (`sudo dmesg -T | grep -i xid`; 79: fell "
         "off the bus, 48/63/64: ECC, 13/31/43: application faults) and drain the node if they "
         "repeat.",
         alarms.xid, "alarm", "risk"),
    Rule("ecc_errors", 90, "critical",
         "Uncorrectable ECC errors: checkpoint, drain the node and run diagnostics "
         "(dcgmi diag -r 3); retired pages need a GPU reset.", alarms.ecc_errors, "alarm", "risk"),
    Rule("thermal_throttled", 80, "warning",
         "The GPU slows down for heat: check fans, airflow and inlet temperature "
         "(nvidia-smi -q -d TEMPERATURE,PERFORMANCE).", clocks.thermal_throttled, role="risk"),
    Rule("memory_growth", 71, "warning",
         "Memory grows steadily: look for tensors kept across steps (`total += loss.item()`, not "
         "`total += loss`; caches that only grow); `print(torch.cuda.memory_summary())` shows "
         "what holds it. Out of memory within a minute: checkpoint or stop the job now.",
         memory.memory_growth, role="risk"),
    Rule("memory_capacity_pressure", 70, "warning",
         "Memory is nearly full; the next spike will run out. Lower batch or sequence length, "
         "enable activation checkpointing, shard optimizer states (FSDP/ZeRO), or quantize "
         "weights/KV cache; `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` cuts "
         "fragmentation.", memory.memory_capacity_pressure, role="risk"),
    Rule("communication_bound", 62, "warning",
         "The GPU waits on NVLink collectives: overlap communication with compute "
         "(`DDP(model, bucket_cap_mb=100)`, FSDP forward/backward prefetch), accumulate "
         "gradients to communicate less often, and check NCCL picked NVLink "
         "(`NCCL_DEBUG=INFO`).", contention.communication_bound, "active"),
    Rule("cpu_bound_host", 61, "warning",
         "The host's CPUs cannot feed the GPU: `DataLoader(ds, num_workers=8, pin_memory=True)` "
         "with workers up to the free cores (`nproc`), move decoding/augmentation to the GPU "
         "(DALI, torchvision.io on CUDA), pre-tokenize or cache preprocessed data.",
         contention.cpu_bound_host, "active"),
    Rule("host_transfer_bound", 60, "warning",
         "Host-device copies saturate PCIe: pinned memory and copies overlapped with compute "
         "(`x.pin_memory().to('cuda', non_blocking=True)`), keep data resident on the GPU, and "
         "send compact dtypes (uint8) converted on the GPU.", activity.host_transfer_bound, "active"),
    Rule("launch_bound", 58, "warning",
         "Kernels are too small to fill the GPU: capture steps with CUDA graphs "
         "(`torch.compile(model, mode='reduce-overhead')`), fuse ops, and raise the batch "
         "size.", activity.launch_bound,
         "active"),
    Rule("input_starved", 56, "warning",
         "The GPU waits for work: `DataLoader(ds, num_workers=8, pin_memory=True, "
         "prefetch_factor=4, persistent_workers=True)`, move preprocessing to the GPU, cache "
         "data on local NVMe, and avoid per-step host syncs (`.item()`, `.cpu()`).", activity.input_starved, "active"),
    Rule("memory_bandwidth_bound", 54, "info",
         "HBM bandwidth is the limit (below the roofline's ridge): raise arithmetic intensity "
         "with larger batches (decode: more concurrent sequences), fuse element-wise ops "
         "(`torch.compile(model)`), use FlashAttention, or move fewer bytes (bf16/FP8 weights, "
         "`vllm serve MODEL --kv-cache-dtype fp8`).", compute.memory_bandwidth_bound, "active"),
    Rule("compute_no_tensor_cores", 52, "warning",
         "SMs are busy on plain FP32 math. Enable TF32 "
         "(torch.set_float32_matmul_precision('high')) or run in bf16 with torch.autocast so "
         "matmuls use tensor cores.", compute.compute_no_tensor_cores, "active"),
    Rule("healthy_compute", 40, "ok",
         "Tensor cores are busy: the GPU does useful work. Further gains come from fused kernels "
         "(FlashAttention, torch.compile), FP8 where accuracy allows, or more GPUs.",
         compute.healthy_compute, "active"),
    Rule("shared_gpu", 35, "warning",
         "Other users' processes share this GPU: ask for a dedicated GPU, or partition it (MIG "
         "on A100/H100/H200, MPS with limits) so each tenant gets a fixed share.",
         contention.shared_gpu, "active"),
    Rule("engine_pool", 34, "info",
         "Nothing to fix: the engine sizes its pool with its own setting, e.g. "
         "`vllm serve MODEL --gpu-memory-utilization 0.90`, SGLang `--mem-fraction-static 0.88`, "
         "TensorRT-LLM `KvCacheConfig(free_gpu_memory_fraction=0.9)`; lower it to leave room for "
         "another process.", memory.engine_pool, role="note"),
    Rule("mig_instance", 33, "info",
         "A MIG slice: size the profile to the work (nvidia-smi mig -lgip lists them); a small "
         "slice caps both SMs and memory.", contention.mig_instance, role="note"),
    Rule("memory_headroom", 32, "info",
         "Under half the memory is used: raise the batch size (or sequence packing) to fill the "
         "GPU better, or move to a smaller, cheaper GPU.", memory.memory_headroom, "active",
         "note"),
    Rule("power_capped", 30, "info",
         "The board runs at its power limit with clocks below max. Expected for dense matmuls; "
         "check the enforced limit was not lowered (nvidia-smi -q -d POWER) and that cooling and "
         "power delivery are sound.", clocks.power_capped, role="note"),
    Rule("idle", 10, "info",
         "Nothing runs on this GPU. Schedule work or stop the instance; if a process holds "
         "memory without running kernels (`nvidia-smi --query-compute-apps=pid,used_memory "
         "--format=csv`), end it to free the GPU.", activity.idle, "idle"),
    # when no rule finds anything (analysis.analyze)
    Rule("unknown", 0, "info", "Not enough signals to say what limits this device.", None),
)

RULES: MappingProxyType[str, Rule] = MappingProxyType({r.kind: r for r in _RULES})
KINDS = tuple(RULES)
ROLES = MappingProxyType({r.kind: r.role for r in _RULES})
PRIORITY = MappingProxyType({r.kind: r.priority for r in _RULES})
SEVERITY = MappingProxyType({r.kind: r.severity for r in _RULES})
ACTIONS = MappingProxyType({r.kind: r.action for r in _RULES})
