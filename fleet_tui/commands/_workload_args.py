"""Workload flags shared by ``fleet-tui size`` and ``fleet-tui recommend``.

``add_workload_args(parser)`` adds them; ``workload_from_args(args, catalog)`` turns them into a
validated :class:`~fleet_tui.core.workload.Workload`, raising ``UserError`` (exit 2) with the flag,
the value and what is allowed. Nothing heavy is imported at module level (``--help`` stays fast).
"""

from __future__ import annotations

import argparse
import math
import re

KINDS = ("inference", "training", "finetune", "lora", "qlora")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8", "int4")
OPTIMIZERS = ("adamw", "adamw8bit", "sgd", "adafactor")
SHARDINGS = ("data", "tensor", "fsdp")
LORA_TARGET_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# Limits that catch typos without getting in the way of real runs.
MAX_BATCH = 1_000_000
MAX_TOKENS = 10_000_000  # longest context any published model supports (Llama-4-Scout: 10M)
MAX_GPUS = 65_536
MAX_PARAMS = 100e12
MIN_PARAMS = 100e6
MAX_LORA_RANK = 65_536

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_params(text: str, flag: str = "--params") -> int:
    """``7e9``, ``7B``, ``70b``, ``405M``, ``1.5T``, ``7_000_000_000`` -> an integer count."""
    raw = str(text).strip().replace("_", "").replace(",", "")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)", raw, re.IGNORECASE)
    if not m:
        raise _err(f"{flag} {text!r}: not a parameter count; write e.g. 7e9, 7B, 70b or 405M")
    value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if not math.isfinite(value) or value < MIN_PARAMS or value > MAX_PARAMS:
        raise _err(f"{flag} {text!r}: must be between 100M and 100T parameters")
    return int(round(value))


def parse_count(text: str | int | None, flag: str, lo: int = 1, hi: int = MAX_TOKENS) -> int | None:
    """A positive integer flag value, with the flag and range named on error."""
    if text is None:
        return None
    raw = str(text).strip().replace("_", "").replace(",", "")
    try:
        value = float(raw) if re.fullmatch(r"[0-9.]+e[+-]?[0-9]+", raw, re.I) else int(raw)
    except ValueError:
        raise _err(f"{flag} {text!r}: not a whole number (allowed: {lo} to {hi:,})") from None
    if isinstance(value, float):
        if not value.is_integer():
            raise _err(f"{flag} {text!r}: not a whole number (allowed: {lo} to {hi:,})")
        value = int(value)
    if value < lo or value > hi:
        raise _err(f"{flag} {value}: out of range (allowed: {lo} to {hi:,})")
    return value


def _err(msg: str) -> Exception:
    from fleet_tui.core.errors import UserError

    return UserError(msg)


def add_workload_args(parser: argparse.ArgumentParser) -> None:
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
                   help="fp32, fp16, bf16 (default), fp8, int8 or int4 (weights; for training the "
                        "compute precision)")
    g.add_argument("--batch", metavar="B", help="sequences per step (global; split across "
                   "data-parallel GPUs), default 1")
    g.add_argument("--seq-len", metavar="S", help="tokens per sequence: a training step, or one "
                   "inference forward pass returning logits at every position")
    g.add_argument("--prompt-len", metavar="P", help="generation: prompt tokens (with --gen-len)")
    g.add_argument("--gen-len", metavar="G", help="generation: new tokens per sequence")
    g.add_argument("--optimizer", choices=OPTIMIZERS, default=None, metavar="OPT",
                   help="training: adamw (default), adamw8bit, sgd or adafactor")
    g.add_argument("--master-weights", choices=("fp32", "none"), default=None,
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
    g.add_argument("--serving", choices=("interactive", "batch"), default=None,
                   help="inference: interactive (always-on) or batch serving")


def _resolve_model(args: argparse.Namespace, catalog):
    if getattr(args, "model", None):
        if catalog is None:
            raise _err("--model needs the catalog; none is loaded")
        return catalog.model(args.model), None
    if getattr(args, "model_config", None):
        from fleet_tui.core.modelspec import load_model_config

        return load_model_config(args.model_config), None
    if getattr(args, "params", None):
        return None, parse_params(args.params)
    raise _err("say which model: --model NAME (see `fleet-tui catalog models`), "
               "--model-config PATH/config.json or --params N (e.g. 7B)")


def workload_from_args(args: argparse.Namespace, catalog=None):
    """The :class:`Workload` the flags describe; ``UserError`` on any bad or conflicting flag."""
    from pydantic import ValidationError

    from fleet_tui.core.workload import Workload

    kind = getattr(args, "workload", None) or "inference"
    training = kind != "inference"
    adapter = kind in ("lora", "qlora")
    model, params = _resolve_model(args, catalog)
    batch = parse_count(getattr(args, "batch", None), "--batch", 1, MAX_BATCH) or 1
    seq = parse_count(getattr(args, "seq_len", None), "--seq-len")
    prompt = parse_count(getattr(args, "prompt_len", None), "--prompt-len")
    gen = parse_count(getattr(args, "gen_len", None), "--gen-len")
    gpus = parse_count(getattr(args, "gpus", None), "--gpus", 1, MAX_GPUS) or 1
    rank = parse_count(getattr(args, "lora_rank", None), "--lora-rank", 1, MAX_LORA_RANK)

    if gen is not None and prompt is None:
        raise _err("--gen-len needs --prompt-len (generation = a prompt plus new tokens)")
    if prompt is not None and gen is None:
        raise _err("--prompt-len needs --gen-len; for one forward pass over the prompt use --seq-len")
    if seq is not None and prompt is not None:
        raise _err("give either --seq-len (one forward pass / training step) or --prompt-len with "
                   "--gen-len (generation), not both")
    if training and prompt is not None:
        raise _err(f"--prompt-len/--gen-len describe generation; --workload {kind} takes --seq-len")
    arch_max = getattr(model, "max_position", None)
    for flag, value in (("--seq-len", seq), ("--prompt-len + --gen-len", (prompt or 0) + (gen or 0) or None)):
        if value is not None and arch_max and value > arch_max * 4:
            raise _err(f"{flag} {value}: far beyond {model.name or model.id}'s context window of "
                       f"{arch_max:,} tokens")
    if not training:
        for flag, attr in (("--optimizer", "optimizer"), ("--master-weights", "master_weights"),
                           ("--grad-checkpointing", "grad_checkpointing")):
            if getattr(args, attr, None) not in (None, False):
                raise _err(f"{flag} applies to training workloads (--workload training|finetune|lora|qlora), "
                           "not inference")
    if not adapter and (rank is not None or getattr(args, "lora_targets", None)):
        raise _err("--lora-rank/--lora-targets apply to --workload lora or qlora")
    if kind in ("training", "finetune") and args.precision in ("int8", "int4"):
        raise _err(f"--precision {args.precision} cannot train all weights; use --workload qlora "
                   "(4-bit base + LoRA) or a 16-bit precision")

    kw: dict = dict(kind=kind, model=model, params=params, precision=args.precision, batch=batch,
                    seq_len=seq, prompt_len=prompt, gen_len=gen, gpus=gpus)
    if kind == "qlora" and args.precision in ("int4", "int8", "fp8", "fp32"):
        kw["precision"] = "bf16"  # the NF4 base is implied; compute runs in bf16
    for attr in ("optimizer", "master_weights", "sharding", "serving"):
        if getattr(args, attr, None) is not None:
            kw[attr] = getattr(args, attr)
    if adapter:
        kw.setdefault("master_weights", "none")  # adapters train in fp32; the base stays 16-bit
    if getattr(args, "grad_checkpointing", None):
        kw["grad_checkpointing"] = True
    if rank is not None:
        kw["lora_rank"] = rank
    targets = getattr(args, "lora_targets", None)
    if targets:
        names = [t.strip() for t in targets.split(",") if t.strip()]
        if names == ["all"]:
            names = list(LORA_TARGET_NAMES)
        bad = [t for t in names if t not in LORA_TARGET_NAMES]
        if bad or not names:
            raise _err(f"--lora-targets {targets!r}: unknown module(s) {', '.join(bad) or '(none)'}; "
                       f"allowed: {', '.join(LORA_TARGET_NAMES)} or 'all'")
        kw["lora_targets"] = tuple(dict.fromkeys(names))
    if gpus > 1 and "sharding" not in kw:
        kw["sharding"] = "fsdp" if kind in ("training", "finetune") else ("tensor" if kind == "inference" else "data")
    if kw.get("sharding") == "tensor" and model is not None and model.kv_heads and gpus > 1:
        if model.heads % gpus:
            raise _err(f"--gpus {gpus} --sharding tensor: {model.heads} attention heads of "
                       f"{model.name or model.id} do not split evenly across {gpus} GPUs")
    try:
        return Workload(**kw)
    except ValidationError as exc:
        msgs = "; ".join(str(e.get("ctx", {}).get("error") or e["msg"]).removeprefix("Value error, ")
                         for e in exc.errors())
        raise _err(msgs) from None
