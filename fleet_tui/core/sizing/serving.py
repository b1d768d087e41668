"""How many KV-cache tokens and concurrent sequences a serving engine fits (each engine's own
budgeting, :mod:`fleet_tui.core.perf.engines`)."""

from __future__ import annotations

from fleet_tui.core.footprint import parallel_split
from fleet_tui.core.perf.engines import kv_pool
from fleet_tui.core.records import record
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


@record
class KVCapacity:
    tokens: int  # KV-cache tokens the free memory of one replica holds
    concurrent_sequences: int  # sequences of (prompt + generated) tokens that fit at once
    free_bytes: int = 0
    bytes_per_token: int = 0
    sequence_tokens: int = 0


def serving_sequence_tokens(w: Workload) -> int:
    if w.prompt_len is not None:
        return w.prompt_len + (w.gen_len or 0)
    if w.seq_len is not None:
        return w.seq_len
    return min(w.arch.max_position or 4096, 4096)


def kv_capacity(workload: Workload, accelerator: Accelerator, gpus: int | None = None) -> KVCapacity:
    """KV-cache tokens and concurrent sequences the workload's serving engine fits on ``gpus`` ×
    ``accelerator``: the engine's own budget (:func:`fleet_tui.core.perf.engines.kv_pool` — vLLM's
    ``gpu_memory_utilization × total − weights − non-torch − profiled activations``, TensorRT-LLM's
    share of the free memory, SGLang's ``mem_fraction_static``) over the KV bytes per token in the
    ``kv_cache_dtype``. Checked against engines' logged pools in
    ``tests/fixtures/validation/kv_capacity.toml`` (``bench/bench_validation.py``).
    Data-parallel replicas add up; tensor parallel splits KV heads across GPUs.
    """
    n = int(gpus or workload.gpus)
    # hf keeps no KV pool: show the pool of a serving engine that runs the model (vLLM; TensorRT-LLM
    # for an encoder-decoder model, which vLLM does not serve)
    pool_engine = "trtllm" if workload.arch.is_encoder_decoder else "vllm"
    w = workload if workload.engine != "hf" else workload.derive(engine=pool_engine)
    dp, tp, _ = parallel_split(w if w.sharding != "fsdp" else w.derive(sharding="data"), n)
    seq = serving_sequence_tokens(w)
    pool = kv_pool(w, accelerator, n, seq)
    if pool.tokens <= 0:
        return KVCapacity(0, 0, 0, int(pool.bytes_per_token), seq)
    return KVCapacity(tokens=pool.tokens * dp, concurrent_sequences=(pool.tokens // seq) * dp,
                      free_bytes=int(pool.free_bytes) * dp, bytes_per_token=int(pool.bytes_per_token),
                      sequence_tokens=seq)
