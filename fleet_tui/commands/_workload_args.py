"""Workload flags shared by ``fleet-tui size`` and ``fleet-tui recommend``.

``add_workload_args(parser)`` adds them; ``workload_from_args(args, catalog)`` hands them to the
core's :func:`~fleet_tui.core.workload.parse_workload` (the one parser the builder pane uses too),
whose ``FieldError``s name the argparse dests and print as these flags (exit 2). Every flag's dest
is the core's field name. Nothing heavy is imported at module level (``--help`` stays fast).
"""

from __future__ import annotations

import argparse

from fleet_tui.core.choices import (
    ENGINES,
    FRAMEWORKS,
    KINDS,
    KV_CACHE_DTYPES,
    MASTER_WEIGHTS,
    OPTIMIZERS,
    PRECISIONS,
    SERVING_MODES,
    SHARDINGS,
)


def flag(field: str) -> str:
    """The flag of a core field (its argparse dest): ``seq_len`` -> ``--seq-len``."""
    return "--" + field.replace("_", "-")


def add_network_arg(group: argparse._ActionsContainer) -> None:
    """``--network``, as ``size`` and ``recommend`` both take it (parsed once, by the core's
    :func:`~fleet_tui.core.interconnects.parse_network`)."""
    group.add_argument("--network", metavar="NET", default=None,
                       help="network between nodes: Gbit/s per node (3200G, 3.2T), per device (400G/gpu) or a "
                            "fabric name (efa-v2, efa, ib-ndr, ib-hdr, ib-xdr, roce-400, tcpxo, tcpx, "
                            "ethernet-100g); default: the priced offer's, else the device's usual one, stated")


def add_workload_args(parser: argparse.ArgumentParser) -> None:  # long: one add_argument per flag, in --help order
    g = parser.add_argument_group("workload")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--model", metavar="NAME", help="model from the catalog, e.g. llama-3.1-8b "
                     "(see `fleet-tui catalog models`)")
    src.add_argument("--model-config", metavar="PATH", help="a local Hugging Face config.json (offline)")
    src.add_argument("--params", metavar="N", help="parameter count only (7e9, 7B, 405M); a "
                     "Llama-like shape is assumed")
    g.add_argument("--workload", default="inference", choices=KINDS, metavar="KIND",
                   help="inference (default), training, finetune, lora or qlora")
    g.add_argument("--precision", default="bf16", choices=PRECISIONS, metavar="P",
                   help="fp32, fp16, bf16 (default), fp8, fp4, int8 or int4 (weights; for training the "
                        "compute precision)")
    g.add_argument("--batch", metavar="B", help="sequences per step (global; split across "
                   "data-parallel GPUs), default 1")
    g.add_argument("--batch-per-device", metavar="B", help="training: sequences per data-parallel GPU, as "
                   "torchtune's batch_size, Transformers' per_device_train_batch_size or MaxText's "
                   "per_device_batch_size count them (the global batch is B x gpus / (tp x pp x cp))")
    g.add_argument("--seq-len", metavar="S", help="tokens per sequence: a training step, or one "
                   "inference forward pass returning logits at every position")
    g.add_argument("--target-len", metavar="T", help="encoder-decoder (T5-family) models: decoder tokens per "
                   "sequence (default --seq-len, which is then the encoder's source)")
    g.add_argument("--prompt-len", metavar="P", help="generation: prompt tokens (with --gen-len)")
    g.add_argument("--gen-len", metavar="G", help="generation: new tokens per sequence")
    g.add_argument("--optimizer", choices=OPTIMIZERS, default=None, metavar="OPT",
                   help="training: adamw (default; adamw8bit under --framework unsloth), adamw8bit, "
                        "paged_adamw8bit, sgd or adafactor")
    g.add_argument("--master-weights", choices=MASTER_WEIGHTS, default=None,
                   help="training: fp32 master weights with autocast (default) or none (pure bf16/fp16)")
    g.add_argument("--grad-checkpointing", action="store_true", default=None,
                   help="training: recompute activations in backward")
    g.add_argument("--lora-rank", metavar="R", help="lora/qlora: adapter rank (default 16)")
    g.add_argument("--lora-targets", metavar="LIST", help="lora/qlora: comma-separated modules "
                   "(default q_proj,k_proj,v_proj,o_proj; 'all' = every linear)")
    g.add_argument("--gpus", metavar="N", help="GPUs the workload runs on (default 1)")
    g.add_argument("--sharding", choices=SHARDINGS, default=None,
                   help="across GPUs: data (replicas), tensor (split layers) or fsdp (ZeRO-3); default with "
                        "--gpus > 1: fsdp for training/finetune, tensor for inference, data for lora/qlora")
    lay = parser.add_argument_group("parallel layout (default: the cheapest layout that fits, searched)")
    lay.add_argument("--tp", metavar="N", help="tensor-parallel size: each layer split over N devices of a node")
    lay.add_argument("--pp", metavar="N", help="pipeline stages: the layers split into N stages")
    lay.add_argument("--dp", metavar="N", help="data-parallel replicas (--gpus = tp x pp x dp)")
    lay.add_argument("--zero", metavar="STAGE", choices=("0", "1", "2", "3"),
                     help="ZeRO stage over the data-parallel replicas: 1 optimizer states, 2 + gradients, "
                          "3 + weights (= FSDP)")
    lay.add_argument("--micro-batch", metavar="M", help="training: sequences per forward on one replica; "
                     "the rest of its share of --batch is gradient accumulation")
    lay.add_argument("--cp", metavar="N", help="training: context parallel, each sequence split over N devices "
                     "(ring attention; Megatron/NeMo context_parallel_size, torchtitan cp)")
    lay.add_argument("--vpp", metavar="V", help="training: interleaved pipeline, V model chunks per stage "
                     "(virtual pipeline size; shrinks the bubble by V)")
    lay.add_argument("--sp", dest="sequence_parallel", action="store_true", default=None,
                     help="training: sequence parallel with --tp (norms and dropout split over the TP group)")
    g.add_argument("--serving", choices=SERVING_MODES, default=None,
                   help="inference: interactive (always-on) or batch serving")

    e = parser.add_argument_group("serving engine (inference)")
    e.add_argument("--engine", choices=ENGINES, default=None,
                   help="vllm (default), trtllm, sglang or hf: batching, memory reservation and kernel "
                        "efficiency of that engine")
    e.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default=None,
                   help="KV-cache precision: auto (default, the compute dtype), fp16, bf16, fp8 or int8")
    e.add_argument("--gpu-memory-utilization", metavar="F", default=None,
                   help="share of device memory the engine may take (vllm default 0.9; sglang "
                        "mem_fraction_static; trtllm: share of the memory left after the weights)")
    e.add_argument("--max-num-batched-tokens", metavar="N", default=None,
                   help="tokens per engine step (prefill chunk), default per engine (8192)")
    e.add_argument("--api-server-count", metavar="N", default=None,
                   help="vllm: API-server processes in front of each replica (default 1; each takes about "
                        "4 ms per request + 45 µs per output token of one CPU core)")
    e.add_argument("--expert-parallel", action="store_true", default=None,
                   help="MoE: attention data parallel and the experts split over --gpus (vLLM "
                        "--enable-expert-parallel, SGLang DP attention + EP, TensorRT-LLM attention DP)")
    t = parser.add_argument_group("training stack")
    t.add_argument("--framework", choices=FRAMEWORKS, default=None, metavar="STACK",
                   help="hf (default: Transformers + PEFT, AMP), torchtune (pure bf16, chunked loss, "
                        "activation checkpointing, FSDP2 on several GPUs), unsloth (fused kernels, offloaded "
                        "checkpoints, fused loss, 8-bit AdamW), deepspeed (Transformers + PEFT under "
                        "DeepSpeed ZeRO-3 at its default knobs; with --offload), torchtitan (FSDP2 mixed "
                        "precision, selective checkpointing), megatron, nemo (distributed optimizer, TP/SP, "
                        "selective recompute), maxtext (TPU), optimum-habana (Gaudi) or neuronx (Trainium); "
                        "the output states what the preset assumes")
    t.add_argument("--chunked-loss", action="store_true", default=None,
                   help="cross-entropy over chunks: no full-sequence fp32 logits")
    t.add_argument("--optimizer-in-backward", action="store_true", default=None,
                   help="step each parameter as its gradient is ready: no full gradient buffer")
    t.add_argument("--offload", metavar="LIST", default=None,
                   help="keep in CPU memory: activations, optimizer, params (comma-separated, combinable)")
    t.add_argument("--compile", action="store_true", default=None,
                   help="torch.compile: fused elementwise ops keep fewer intermediates")
    t.add_argument("--selective-checkpointing", action="store_true", default=None,
                   help="recompute only the cheap ops (attention core, MLP activation) in backward")


def workload_from_args(args: argparse.Namespace, catalog=None):
    """The :class:`Workload` the flags describe; ``FieldError``/``UserError`` on any bad or conflicting flag."""
    from fleet_tui.core.workload import parse_workload

    return parse_workload(args, catalog)
