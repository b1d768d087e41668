"""What a serving engine's start-up profile run charges before it sizes the KV pool.

vLLM sizes its pool as ``gpu_memory_utilization × total − weights − non-torch memory − the
PyTorch peak of one profile run`` (V0 ``worker.determine_num_available_blocks``; V1
``gpu_worker.determine_available_memory``, vllm 0.8-0.19; the log line "Total non KV cache memory:
…; torch peak memory increase: …; non-torch forward increase memory: …; weights memory: …"). The
profile run is two steps, and their peaks do not add up: the forward frees its layer intermediates
before the sampler runs.

* **Forward**: one batch of ``max_num_batched_tokens`` tokens (V0 without chunked prefill:
  ``max(max_model_len, 2048)``; V1 and chunked prefill: the chunk, 8192 by default for the API server on
  80 GB-class Hopper GPUs and 2048 on smaller ones in vllm 0.10-0.19, ``arg_utils`` "Defaulting
  max_num_batched_tokens"). Its peak is the widest live set of one decoder layer
  (:func:`fleet_tui.core.footprint.forward_transient`), split over the tensor ranks.
* **Sampler**: fp32 logits over the whole vocabulary for ``max_num_seqs`` sequences (256 by default;
  1024 for the API server on 80 GB-class Hopper GPUs in vllm 0.11+), with the sampler's
  probabilities, log-probabilities and sort buffers. The logits are gathered whole on the sampling
  rank (V0 ``LogitsProcessor._gather_logits``; V1 all-gathers), so this term does not shrink with
  tensor parallelism: llm-d-planner's vllm 0.19 sweep logs the same activation peak at TP 1, 2 and 4
  (1.89 GiB for Llama-3.1-8B, 2.21 GiB for Qwen2.5-7B, 1024 sequences).

Engines that allocate their activation workspace and logits buffers statically (TensorRT-LLM) or
per request (Hugging Face) hold both at once: :func:`static_buffers_bytes`, the charge the serving
fit was made with, not re-derived in this pass.

CUDA graphs are captured after the pool is sized through vllm 0.19 (its log: "In v0.19, CUDA graph
memory profiling will be enabled by default"), so they are not in this budget.
"""

from __future__ import annotations

from fleet_tui.core import calibration as cal
from fleet_tui.core.footprint import forward_transient
from fleet_tui.core.modelspec import ModelArch

#: Vocabulary-sized fp32 buffers per profiled sequence at the sampler's peak (logits, probabilities,
#: log-probabilities, sort values and indices). Fitted on the tune rows of kv_capacity.toml by
#: bench/fit_kv.py; the vllm 0.19 TP1 rows alone give 3.86 (Llama-3.1-8B: 1.89 GiB / (1024 × 128256 × 4 B))
#: and 3.81 (Qwen2.5-7B).
SAMPLER_COPIES = 3.8


def sampler_peak_bytes(arch: ModelArch, seqs: int) -> float:
    """The sampler's peak in the profile run: ``seqs`` rows of fp32 logits over the whole vocabulary."""
    return SAMPLER_COPIES * seqs * arch.vocab * 4


def profile_peak_bytes(arch: ModelArch, act_bytes: int, chunk_tokens: int, seqs: int, tp: int) -> float:
    """PyTorch peak of one profile run on one tensor rank: the wider of the forward over
    ``chunk_tokens`` and the sampler over ``seqs`` sequences, plus cuBLAS's workspace."""
    forward = forward_transient(arch, chunk_tokens, act_bytes, tp)
    return max(forward, sampler_peak_bytes(arch, seqs)) + cal.CUBLAS_WORKSPACE_BYTES


#: fp32 logits, probabilities and log-probabilities per sequence in engines whose buffers coexist
#: with the forward's (the serving fit's charge, kept: bench/fit_serving.py)
STATIC_LOGIT_COPIES = 3


def static_buffers_bytes(arch: ModelArch, act_bytes: int, chunk_tokens: int, seqs: int, tp: int) -> float:
    """Activation workspace plus logits buffers of an engine that holds both at once, per tensor rank."""
    return (forward_transient(arch, chunk_tokens, act_bytes, tp) + STATIC_LOGIT_COPIES * seqs * arch.vocab * 4 / tp
            + cal.CUBLAS_WORKSPACE_BYTES)
