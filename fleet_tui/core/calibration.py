"""Every constant with physical meaning used by sizing and speed estimates, with its source.

Measured values come from ``tests/fixtures/h200/sizing_truth.json`` (one H200, PyTorch 2.11,
transformers 5.17; see its README). Published values cite their source. Fitted values say which
rows they were fitted on and how; there are few of them on purpose — per-row factors would not
generalize to other models and shapes.
"""

from __future__ import annotations

GB = 1_000_000_000
GiB = 1 << 30
MiB = 1 << 20

# --- fixed per-GPU overheads -------------------------------------------------------------------

#: Memory NVML already reports as used on an idle GPU with no process (driver/firmware reserve).
#: Measured on the H200: ``meta.nvml_used_before_cuda_init`` = 648,347,648 B.
DRIVER_RESERVE_BYTES = 648_347_648

#: What creating a CUDA context adds (CUDA 13 with lazy module loading).
#: Measured on the H200: ``meta.cuda_context_bytes`` = 647,561,216 B. Published figures for other
#: setups span 0.3-1 GB (pytorch/pytorch#107667, #28113, #20532); we use the measured one.
CUDA_CONTEXT_BYTES = 647_561_216

#: Kernel images loaded lazily while a job runs (cuBLAS/cuDNN handles, flash-attention, optimizer
#: kernels) and never returned to the pool: NVML-used minus allocator-reserved minus the two
#: constants above. Measured on the H200 rows: 0.08-0.13 GB for loading/inference (mean 0.10),
#: 0.17-0.19 GB once backward and fused-AdamW kernels are loaded (mean 0.18).
RUNTIME_KERNELS_INFERENCE_BYTES = 100_000_000
RUNTIME_KERNELS_TRAINING_BYTES = 180_000_000

#: cuBLAS workspace PyTorch allocates through its caching allocator on the first matmul
#: (CUBLAS_WORKSPACE_CONFIG default on Hopper ":4096:8" = 8 × 4 MiB).
CUBLAS_WORKSPACE_BYTES = 32 * MiB

#: NVML's total is about 1 % below the nominal capacity (H100 "80 GiB" shows 79.19-79.32 GiB,
#: llm-d-planner accuracy report and vllm-project/vllm#15783; H200 "141 GB" shows 150.1e9 B here).
USABLE_MEMORY_FRACTION = 0.99

#: Extra non-PyTorch memory per GPU once GPUs talk to each other (NCCL channels, custom all-reduce
#: buffers): vLLM measured 2.10 GiB/GPU at TP>=2 vs 0.27 GiB at TP=1 on H100 (llm-d-planner,
#: data/configuration/vllm_memory_constants.json) -> 1.83 GiB attributed to communication.
COMM_BUFFERS_BYTES = int(1.83 * GiB)

#: Memory a serving engine uses outside PyTorch's allocator on one GPU: vLLM's measured
#: "non_torch_memory" 0.25-0.27 GiB at TP=1 on H100 (llm-d-planner accuracy report).
SERVING_NON_TORCH_BYTES = int(0.27 * GiB)

# --- caching-allocator slack -------------------------------------------------------------------
# PyTorch's caching allocator keeps freed blocks reserved; activations that are allocated and freed
# layer after layer leave blocks a later, larger request (logits, the next layer's KV) cannot reuse,
# so reserved > allocated. Modelled as a fraction of the *transient* memory (everything above the
# persistent weights/optimizer/gradients at the peak). Fitted on the H200 rows, one number per
# allocation pattern (not per row):
#   forward passes (prefill/generate): reserved-allocated / transient = 0.28-0.45 over 7 prefill
#     rows (median 0.40) and 0.19-0.33 over decode rows with non-trivial transients;
#   training without recompute: 0.02-0.11 (activations are freed during backward in the sizes the
#     gradients then need, so the pool is reused);
#   training with activation recompute: 0.47-0.51 on 3 of 4 rows (the recomputed layer's buffers
#     interleave with freshly allocated gradients); the 4th (Llama-2-7B, fp32 master) shows 10 GB
#     that no transient explains — the model under-predicts it by ~8 %.
ALLOCATOR_SLACK_FORWARD = 0.36
ALLOCATOR_SLACK_TRAINING = 0.05
ALLOCATOR_SLACK_RECOMPUTE = 0.50

# --- bytes per stored value --------------------------------------------------------------------

#: Bytes per weight, including quantization scales. int8: per-group(128) fp16 scale
#: (1 + 2/128); int4: GPTQ/AWQ group 128 with an fp16 scale and a 4-bit zero point
#: (0.5 + 2.5/128); nf4 (QLoRA, double-quantized): 4.127 bits (Dettmers et al., arXiv:2305.14314).
#: fp8: one scale per tensor/channel (negligible). Embeddings, the output head and norms are kept in
#: 16-bit by bitsandbytes, GPTQ, AWQ and vLLM fp8; only decoder linears are quantized.
WEIGHT_BYTES = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0 + 2 / 128,
    "int4": 0.5 + 2.5 / 128,
    # NVFP4 (Blackwell): 4-bit values with one fp8 scale per 16 (NVIDIA, "Introducing NVFP4",
    # developer.nvidia.com blog, 2025) + a per-tensor fp32 scale (negligible)
    "fp4": 0.5 + 1 / 16,
    "nf4": 4.127 / 8,
}

#: Bytes per cached key/value element for an explicit ``kv_cache_dtype`` (``auto`` = the compute
#: dtype): vLLM ``--kv-cache-dtype fp8`` and TensorRT-LLM's fp8/int8 KV store one byte per value.
KV_CACHE_BYTES = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0}

#: Optimizer state bytes per trainable parameter, with 32-bit states (mixed precision with fp32
#: master weights, or fp32 training) and with 16-bit states (pure bf16: the H200 rows' AdamW keeps
#: exp_avg/exp_avg_sq in bf16). HF docs (model_memory_anatomy): AdamW 8 B, 8-bit AdamW 2 B,
#: SGD with momentum 4 B. Adafactor: factored second moment (rows + columns per matrix), computed
#: from the architecture; beta1=None (no first moment), the HF default.
#: paged_adamw8bit (bitsandbytes) keeps the same 8-bit states in unified memory: they page to the
#: CPU only when the GPU runs out, so its footprint while it fits is adamw8bit's.
OPTIMIZER_BYTES_FP32 = {"adamw": 8.0, "adamw8bit": 2.0, "paged_adamw8bit": 2.0, "sgd": 4.0}
OPTIMIZER_BYTES_BF16 = {"adamw": 4.0, "adamw8bit": 2.0, "paged_adamw8bit": 2.0, "sgd": 2.0}

#: Bytes per token per vocabulary entry for the loss at the start of backward in HF training:
#: logits (2 B bf16) + the fp32 up-cast log-softmax kept for backward (4 B) + the fp32 gradient of
#: the log-softmax being formed (4 B) + its 16-bit copy (2 B). Checked against the H200 rows
#: (Llama-3.2-1B/3B: the peak matches within 1 %).
LOSS_BYTES_PER_VOCAB_TOKEN = 12.0
#: The same at the end of the forward pass: logits + fp32 copy + fp32 log-softmax output.
LOSS_FORWARD_BYTES_PER_VOCAB_TOKEN = 10.0

# --- speed ---------------------------------------------------------------------------------------
# Achieved fraction of the *dense* datasheet peak (what the catalog stores). These fractions only
# ever scale a published figure: where the catalog has no peak (or no bandwidth) for a device, the
# estimate that needs it is unknown (fleet_tui.core.perf), never a fraction of a guessed number. Power and clocks cap
# a GPU below its datasheet: the H200 sustained 662 TFLOP/s on bf16 8192^3 matmuls at its 700 W
# cap = 0.669 of the 989.5 dense peak (meta.matmul_tflops). Copies reached 4.25 TB/s of 4.8 = 0.885.

#: Large-GEMM efficiency (fraction of the dense datasheet peak) by architecture, matched on the
#: start of ``Accelerator.architecture``:
#: * Hopper 0.67 — measured on the H200 (662 of 989.5 TFLOP/s, board at its 700 W cap).
#: * Ampere 0.85 — derived: TensorRT-LLM's A100 FP16 7B prefill runs at 72 % of peak end to end,
#:   so GEMMs reach more than that; MosaicML reaches 60-64 % training MFU on A100
#:   vs 40-46 % on H100 with the same software (§3.3), ~1.4x Hopper's fraction (0.67 × 1.4 = 0.94).
#:   0.85 sits between the two bounds.
#: * Ada 0.60 — TensorRT-LLM's L40S fp8 prefill implies 56 % of peak end to end,
#:   i.e. GEMMs at least that; PCIe boards are power-limited like the H200.
#: * Blackwell 0.65 — assumed like Hopper (no public measurement in the field notes).
#: * everything else (Volta/Turing, CDNA, Gaudi, Neuron, TPU) 0.50 — an explicit assumption, no
#:   measurement in the field notes; treat their speed estimates as rough.
MATMUL_EFFICIENCY = {
    # TPU and Gaudi: fitted on the tune rows of tests/fixtures/validation/training_speed.toml
    # (MaxText's v5e/v6e tables, Intel's Gaudi 2 training table), whole-step efficiency 0.70
    # (core.frameworks); their error is in docs/training.md
    "TPU v5": 0.85,
    "TPU v6e": 0.60,
    "Gaudi": 0.70,
    "Hopper": 0.67,
    "Blackwell": 0.65,
    "Ampere": 0.85,
    "Ada": 0.60,
    "default": 0.50,
}
#: fp8 matmuls reach a lower fraction of their (2x) peak than bf16: MosaicML H100 FP8 training MFU
#: 27.7-30 % vs 40-46 % bf16 (ratio 0.65); TensorRT-LLM H100 FP8 7B prefill 42 % of the fp8 peak vs
#: the 50 % bf16 prefill measured on the H200 here (ratio 0.84). Midpoint 0.75.
FP8_EFFICIENCY_FACTOR = 0.75
#: int8/int4 weight-only kernels (and fp8 weights on a GPU without fp8 tensor cores: FP8 Marlin) compute
#: in 16-bit after de-quantizing: prefill/training speed uses the 16-bit peak times this factor for the
#: de-quantization work. An assumption (no measurement in
#: the field notes); decode, which is what quantization speeds up, does not use it.
WEIGHT_ONLY_QUANT_COMPUTE_FACTOR = 0.8

#: Achieved fraction of peak HBM bandwidth when streaming weights and KV in decode (model bandwidth
#: utilisation, MBU, as Databricks defines it) for an optimized serving engine
#: (vLLM/TensorRT-LLM class). Upper bound: the H200's measured copy rate, 0.885 of 4.8 TB/s. Decode
#: kernels also run attention, sampling and small GEMMs between weight reads, so we assume 0.75. The
#: H200 ground-truth decode rows (HF eager, launch-bound: 35 tokens/s for 8B at batch 1 = 0.12 MBU)
#: are deliberately not used.
DECODE_BANDWIDTH_EFFICIENCY = 0.75

#: Bandwidth a device-to-device copy reaches of the datasheet HBM figure: measured 4.25 TB/s
#: (read + write) of the H200's 4.8 TB/s (meta.copy_tb_s_read_plus_write). Used for the memory-bound
#: parts of a training step (optimizer update, AMP casts).
COPY_BANDWIDTH_EFFICIENCY = 4.25 / 4.8

#: Fraction of the large-GEMM rate a whole Hugging Face eager step keeps (norms, rotary, softmax,
#: elementwise ops, launches), fitted once per step kind on the H200 rows (not per row):
#: prefill forward 0.68-0.80 over 7 rows -> 0.74; training 0.57-0.76 over 7 rows once the optimizer
#: update and AMP casts are timed separately at copy bandwidth -> 0.62. For scale, MosaicML's H100
#: bf16 MFU of 40-46 % is 0.60-0.69 of our Hopper GEMM efficiency.
PREFILL_STEP_EFFICIENCY = 0.74
TRAINING_STEP_EFFICIENCY = 0.62

#: Multi-GPU scaling efficiency per extra doubling of GPUs for data-parallel/FSDP training
#: (MosaicML 8 -> 128 H100: per-GPU tokens/s within 1-5 %; Megatron 96 -> 4608 GPUs 47 % -> 42 % MFU
#: ≈ 0.98 per doubling). Tensor parallel pays more (all-reduce per layer): 0.92 per doubling within
#: an NVLink node (derived from vLLM/TRT-LLM TP scaling tables).
SCALING_PER_DOUBLING = {"data": 0.98, "fsdp": 0.97, "tensor": 0.92}

#: Decode with tensor parallelism all-reduces the activations twice per layer (after attention and
#: after the MLP). At decode sizes (a few KiB per sequence) that is latency-bound: NCCL's small-
#: message all-reduce on one NVLink node takes roughly 10-20 us at 8 GPUs and serving engines'
#: custom all-reduce about half that; both grow with the log of the group (a tree or a ring of
#: doubling steps). We charge 4 us per doubling: 12 us per all-reduce at TP 8, so Llama-3.1-8B
#: (32 layers) pays ~0.8 ms per token. It is what stops a 64-way split from looking 64x faster.
TP_ALLREDUCE_S_PER_DOUBLING = 4e-6
