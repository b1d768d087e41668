"""DeepSpeed ZeRO-3: what one GPU holds when the parameters are partitioned (and maybe offloaded).

``--framework deepspeed`` is Transformers + PEFT under DeepSpeed's ZeRO stage 3, with or without
``offload_param``/``offload_optimizer`` (``--offload params,optimizer``). PyTorch FSDP (``hf`` and
``torchtune`` with ``fsdp`` sharding) gathers one wrapped layer and prefetches the next, which is what
:mod:`.memory` counts for them; DeepSpeed's coordinator keeps far more gathered, by these knobs
(``DeepSpeedZeroConfig`` in deepspeed/runtime/zero/config.py; the defaults below). Accelerate's
generated DeepSpeed config (``accelerate config`` → ``DeepSpeedPlugin``) sets none of them, so PEFT's
``peft_lora_*_accelerate_ds_zero3_offload.py`` examples run with the defaults:

* ``stage3_max_live_parameters`` (1e9): "the maximum number of parameters resident per GPU before
  releasing". Gathered parameters stay until that many are resident; prefetching
  (``stage3_prefetch_bucket_size``, 5e7 elements at a time) only fills up to it.
* a module's parameters are gathered whole when it runs: a 250k-vocabulary embedding or untied output
  head (1.0B parameters in mT0-XXL and BLOOM-7B1) is fetched in one piece even when the budget is
  already full. The budget is therefore ``max_live + the largest module``, capped at the model.
* ``stage3_param_persistence_threshold`` (1e5): smaller parameters are never partitioned: norms,
  biases and LoRA adapters stay whole on every GPU.
* ``reduce_bucket_size`` (5e8 elements): with ``contiguous_gradients`` (default on) stage 3 allocates
  this gradient bucket on the GPU, in the trainable parameters' dtype, when the optimizer is set up
  (``DeepSpeedZeroOptimizer_Stage3._setup_for_real_optimizer``), whether the optimizer is offloaded or
  not. PEFT's DeepSpeed guide logs "GPU Memory before entering the train : 1916" MiB for its example:
  5e8 fp32 elements are 1907 MiB.

The budget follows the documented knobs; it is not fitted to any row. Measured error
(tests/fixtures/validation, PEFT README, one A100 80GB, CPU offload): T0_3B −4.7 %, mT0-XXL −25.8 %,
BLOOMZ-7B1 −20.1 %. The two with a 1.0B-parameter embedding/head hold more than this budget gives;
what else the coordinator keeps (``stage3_max_reuse_distance``, 1e9, retains a parameter needed again
soon) depends on the module order, which the shape alone does not give.
"""

from __future__ import annotations

from fleet_tui.core.modelspec import ModelArch, ParamCounts
from fleet_tui.core.records import record
from fleet_tui.core.workload import Workload

#: DeepSpeedZeroConfig defaults (deepspeed/runtime/zero/config.py)
MAX_LIVE_PARAMETERS = 1_000_000_000  # stage3_max_live_parameters
PREFETCH_BUCKET_SIZE = 50_000_000  # stage3_prefetch_bucket_size (within max_live)
PARAM_PERSISTENCE_THRESHOLD = 100_000  # stage3_param_persistence_threshold
REDUCE_BUCKET_SIZE = 500_000_000  # reduce_bucket_size (elements)


@record
class Zero3Footprint:
    """Bytes one GPU holds for the parameters under DeepSpeed ZeRO-3."""

    gathered_bytes: float  # full parameters gathered at the peak (the live budget)
    persistent_bytes: float  # parameters below the persistence threshold, whole on every GPU
    reduce_bucket_bytes: float  # the contiguous gradient bucket
    note: str


def largest_module_params(arch: ModelArch, pc: ParamCounts) -> int:
    """Parameters of the biggest module ZeRO-3 gathers in one piece: the embedding, an untied output
    head, or a layer's widest linear (one expert's for mixture-of-experts models)."""
    ffn = arch.expert_intermediate if arch.is_moe else arch.intermediate
    return max(pc.embedding, pc.lm_head, arch.hidden * max(ffn, arch.q_dim))


def zero3_footprint(w: Workload, pc: ParamCounts, tp: int, param_bytes: float, trainable_bytes: float,
                    persistent_bytes: float) -> Zero3Footprint:
    """:class:`Zero3Footprint` of ``w`` (``param_bytes``: bytes of a gathered parameter;
    ``trainable_bytes``: of a trainable one, the bucket's dtype; ``persistent_bytes``: the parameters
    kept whole, e.g. norms and LoRA adapters)."""
    partitioned = pc.total - pc.norms
    live = min(partitioned, MAX_LIVE_PARAMETERS + largest_module_params(w.arch, pc))
    note = (f"DeepSpeed ZeRO-3: up to {live / 1e9:.2f}B parameters gathered at once "
            f"(stage3_max_live_parameters {MAX_LIVE_PARAMETERS:.0e} + the largest module, gathered whole), "
            f"a {REDUCE_BUCKET_SIZE:.0e}-element gradient bucket, parameters under "
            f"{PARAM_PERSISTENCE_THRESHOLD:.0e} elements kept whole (DeepSpeed defaults)")
    return Zero3Footprint(gathered_bytes=live * param_bytes / tp, persistent_bytes=persistent_bytes,
                          reduce_bucket_bytes=REDUCE_BUCKET_SIZE * trainable_bytes, note=note)
