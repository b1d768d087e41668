"""How many KV-cache tokens and concurrent sequences a serving engine fits (each engine's own
budgeting, :mod:`fleet_tui.core.perf.engines`)."""

from __future__ import annotations

from fleet_tui.core import calibration as cal
from fleet_tui.core.footprint import parallel_layout, parallel_split, sequence_state_bytes
from fleet_tui.core.perf.engines import engine_profile, expert_parallel, kv_pool
from fleet_tui.core.records import record
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


@record
class KVCapacity:
    """The KV-cache tokens and concurrent sequences one replica holds."""

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


# --- the engine's own verdict: does it start, and how many sequences run at a time ---------------

#: The engines' own words when they cannot start (quoted from their sources; the numbers are ours).
#: vLLM V1 ``kv_cache_utils.check_enough_kv_cache_memory``; SGLang ``model_runner`` (pool sizing);
#: TensorRT-LLM's KV cache manager sizes its blocks from the free memory after the weights.
ENGINE_NO_MEMORY = {
    "vllm": "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
    "sglang": "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "trtllm": "out of memory: no KV cache blocks left after the weights and activation buffers "
              "(KvCacheConfig.free_gpu_memory_fraction)",
}


def engine_too_short(engine: str, seq: int, need_gib: float, have_gib: float, max_len: int) -> str:
    """The engine's error when its pool cannot hold one sequence of the context length."""
    if engine == "vllm":
        return (f"ValueError: To serve at least one request with the models's max seq len ({seq}), "
                f"({need_gib:.2f} GiB KV cache is needed, which is larger than the available KV cache "
                f"memory ({have_gib:.2f} GiB). Based on the available memory, the estimated maximum "
                f"model length is {max_len}. Try increasing `gpu_memory_utilization` or decreasing "
                "`max_model_len` when initializing the engine.")
    if engine == "sglang":
        return (f"the KV pool holds {max_len} tokens, less than one request of {seq} "
                "(SGLang: raise --mem-fraction-static or lower --context-length)")
    return (f"the KV cache holds {max_len} tokens, less than one request of {seq} "
            "(TensorRT-LLM: raise free_gpu_memory_fraction or lower max_seq_len)")


@record
class EngineFit:
    """How a serving engine (vllm, trtllm, sglang) takes ``gpus`` devices: what it reserves per
    GPU, whether it starts, and how many of the batch's sequences it runs at once."""

    engine: str
    starts: bool
    reserved_bytes: int  # per GPU: the engine's budget (vLLM utilization × total, SGLang static fraction...)
    parts: dict[str, int]  # per GPU: weights, activation_peak, non_torch, cuda_graphs, kv_pool
    kv_tokens: int  # per replica
    sequence_tokens: int  # one request: prompt + generated (the context the engine must hold)
    running: int  # sequences in flight across the setup (0 when it does not start)
    queued: int  # the batch's other requests, waiting for a slot
    limit: str  # what sets ``running``: "kv cache", "max_num_seqs", "batch", ""
    error: str = ""  # the engine's own words when it does not start
    replicas: int = 1


def held_tokens_per_sequence(w: Workload, prompt: int, gen: int) -> float:
    """KV tokens the scheduler charges one running sequence: the whole request when it reserves at
    admission (TensorRT-LLM's GUARANTEED_NO_EVICT), else the prompt and half the output on average
    (vLLM, SGLang allocate blocks as tokens are made). The one rule serving speed uses too."""
    return float(prompt + gen) if engine_profile(w).reserve_full_sequence else prompt + gen / 2


def engine_fit(w: Workload, acc: Accelerator, gpus: int | None = None) -> EngineFit:
    """The engine's verdict on ``gpus`` × ``acc`` (see :func:`kv_pool` for the budget): it **starts**
    when the weights, the profile run and one sequence of the context fit its budget; then it runs
    ``min(KV pool / tokens held per sequence, max_num_seqs, batch)`` sequences at a time per
    replica and queues the rest."""
    n = int(gpus or w.gpus)
    e = engine_profile(w)
    dp, tp, _ = parallel_split(w, n)
    seq = serving_sequence_tokens(w)
    pool = kv_pool(w, acc, n, seq)
    parts = {k: int(v) for k, v in pool.parts.items()}
    parts["kv_pool"] = int(pool.free_bytes)
    budget = int(sum(parts.values()) - (parts["activation_peak"] + parts["non_torch"] + parts["cuda_graphs"]
                                        if e.id == "sglang" else 0))
    one_seq = seq * pool.bytes_per_token
    starts = pool.tokens >= seq
    error = ""
    if not starts:
        if pool.free_bytes <= 0:
            error = ENGINE_NO_MEMORY.get(e.id, "out of memory")
        else:
            error = engine_too_short(e.id, seq, one_seq / cal.GiB, pool.free_bytes / cal.GiB, pool.tokens)
    prompt = w.prompt_len or seq
    gen = w.gen_len or 0
    held = held_tokens_per_sequence(w, prompt, gen)
    if pool.bytes_per_token:
        held += sequence_state_bytes(w.arch, w, pool_tp(w, n)) / pool.bytes_per_token
    by_kv = int(pool.tokens // max(1.0, held)) if starts else 0
    cap = w.max_num_seqs or e.max_seqs
    per_replica_batch = -(-w.batch // dp)
    limits = (("kv cache", by_kv), ("max_num_seqs", cap), ("batch", per_replica_batch))
    limit, per_replica = min(limits, key=lambda t: t[1])
    running = per_replica * dp if starts else 0
    return EngineFit(engine=e.id, starts=starts, reserved_bytes=budget, parts=parts, kv_tokens=pool.tokens,
                     sequence_tokens=seq, running=running, queued=max(0, w.batch - running) if starts else 0,
                     limit=limit if starts else "", error=error, replicas=dp)


def serves_with_engine(w: Workload) -> bool:
    """The workload is sized as a serving engine runs it (not as Hugging Face ``generate``)."""
    return (not w.is_training) and w.is_generation and w.engine not in (None, "hf")


def running_workload(w: Workload, acc: Accelerator, gpus: int | None = None) -> Workload:
    """``w`` as its serving engine runs it on ``gpus`` × ``acc``: the batch cut to the sequences it
    runs at once (the rest wait), so speed is estimated at the concurrency the engine reaches.
    Unchanged for training, Hugging Face and an engine that does not start. The count is
    :func:`engine_fit`'s, without the report: the ranking asks it of every device group."""
    if w.batch <= 1 or not serves_with_engine(w):
        return w
    n = int(gpus or w.gpus)
    dp = parallel_layout(w, n).dp
    per_replica = -(-w.batch // dp)
    limit = min(per_replica, w.max_num_seqs or engine_profile(w).max_seqs)
    seq = serving_sequence_tokens(w)
    pool = kv_pool(w, acc, n, seq)
    if pool.tokens < seq:
        return w  # it does not start: no speed is asked of it
    held = held_tokens_per_sequence(w, w.prompt_len or seq, w.gen_len or 0)
    if pool.bytes_per_token:
        held += sequence_state_bytes(w.arch, w, pool_tp(w, n)) / pool.bytes_per_token
    running = min(limit, int(pool.tokens // max(1.0, held))) * dp
    return w.derive(batch=running) if 0 < running < w.batch else w


def pool_tp(w: Workload, gpus: int) -> int:
    """Ranks the KV heads are split over (1 under expert parallel: attention is data parallel)."""
    return 1 if expert_parallel(w, gpus) else parallel_layout(w, gpus).tp
