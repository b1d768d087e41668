"""How many KV-cache tokens and concurrent sequences a serving engine fits (vLLM's budgeting).

Checked against vLLM's logged KV pools on an H100 (field-notes §2.7): Llama-3.1-8B 54.6 GiB here vs
54.2 GiB logged, Qwen2.5-7B 55.1 vs 54.6.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet_tui.core import calibration as cal
from fleet_tui.core.footprint import (activation_bytes, forward_transient, kv_bytes_per_token, parallel_split,
                                      weight_bytes)
from fleet_tui.core.modelspec import param_counts
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


@dataclass(frozen=True, slots=True)
class KVCapacity:
    tokens: int  # KV-cache tokens the free memory of one replica holds
    concurrent_sequences: int  # sequences of (prompt + generated) tokens that fit at once
    free_bytes: int = 0
    bytes_per_token: int = 0
    sequence_tokens: int = 0


#: vLLM's default share of device memory an engine may take (gpu_memory_utilization).
SERVING_MEMORY_UTILIZATION = 0.9
#: Tokens in one profiling/prefill chunk of a serving engine (vLLM max_num_batched_tokens class).
SERVING_CHUNK_TOKENS = 8192
#: Sequences sampled at once (vLLM max_num_seqs default 256): their fp32 logits, with the sampler's
#: probability and log-probability copies (3 vocab-sized fp32 tensors per sequence).
SERVING_MAX_SEQS = 256
SERVING_SAMPLER_COPIES = 3


def serving_sequence_tokens(w: Workload) -> int:
    if w.prompt_len is not None:
        return w.prompt_len + (w.gen_len or 0)
    if w.seq_len is not None:
        return w.seq_len
    return min(w.arch.max_position or 4096, 4096)


def kv_capacity(workload: Workload, accelerator: Accelerator, gpus: int | None = None) -> KVCapacity:
    """KV-cache tokens and concurrent sequences a serving engine fits on ``gpus`` × ``accelerator``.

    As vLLM budgets it: ``capacity × gpu_memory_utilization − weights − non-torch memory −
    activation peak of one prefill chunk`` is the KV pool; tokens = pool / KV bytes per token.
    Checked against vLLM's logged pools on an H100 (field-notes §2.7): Llama-3.1-8B 54.6 GiB here
    vs 54.2 GiB (58.11 at utilization 0.95), Qwen2.5-7B 55.1 vs 54.6; Llama-3.1-70B fp8 on one
    80 GB GPU leaves a few thousand tokens ("up to 4k context", LambdaLabs vLLM report).
    Data-parallel replicas add up; tensor parallel splits KV heads across GPUs.
    """
    n = int(gpus or workload.gpus)
    w = workload
    arch = w.arch
    pc = param_counts(arch)
    dp, tp, shard = parallel_split(w if w.sharding != "fsdp" else w.derive(sharding="data"), n)
    act = activation_bytes(w)
    weights = weight_bytes(w.derive(kind="inference") if w.is_training else w, pc) / tp
    # vLLM measures from a baseline taken after CUDA init, so the driver reserve and the context
    # are outside its budget; what it calls non-torch memory is measured separately.
    non_torch = cal.SERVING_NON_TORCH_BYTES + (cal.COMM_BUFFERS_BYTES if tp > 1 else 0)
    activation = (forward_transient(arch, SERVING_CHUNK_TOKENS, act, tp) * (1 + cal.ALLOCATOR_SLACK_FORWARD)
                  + SERVING_SAMPLER_COPIES * SERVING_MAX_SEQS * arch.vocab * 4 / tp
                  + cal.CUBLAS_WORKSPACE_BYTES)
    budget = accelerator.memory_gib * cal.GiB * cal.USABLE_MEMORY_FRACTION * SERVING_MEMORY_UTILIZATION
    free = budget - non_torch - weights - activation
    seq = serving_sequence_tokens(w)
    per_tok = kv_bytes_per_token(arch, w, tp, seq)
    if free <= 0:
        return KVCapacity(0, 0, 0, int(per_tok), seq)
    tokens_one = int(free // per_tok)
    return KVCapacity(tokens=tokens_one * dp, concurrent_sequences=(tokens_one // seq) * dp,
                      free_bytes=int(free) * dp, bytes_per_token=int(per_tok), sequence_tokens=seq)
