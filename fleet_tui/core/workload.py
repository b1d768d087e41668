"""What the user wants to run: the input of sizing, speed, pricing and recommendations.

Owned by the sizing code. Frozen so it can be cached, hashed and shared between threads.

Semantics (the CLI documents the same):

* ``training``/``finetune`` (full fine-tuning) with ``seq_len``: one optimizer step over ``batch``
  sequences of ``seq_len`` tokens. ``precision`` is the compute precision; ``master_weights="fp32"``
  keeps fp32 parameters and runs the forward under autocast (PyTorch AMP), ``"none"`` keeps
  parameters, gradients and optimizer states in ``precision`` (pure bf16).
* ``lora``: a frozen base in ``precision`` with LoRA adapters of ``lora_rank`` on ``lora_targets``;
  ``qlora``: the same with a 4-bit NF4 base (``precision`` = compute dtype).
* ``inference`` with ``seq_len`` and no ``gen_len``: one forward pass over the batch returning
  logits at every position; with ``prompt_len``/``gen_len``: generation; with neither: the model
  loaded and ready.
* ``batch`` is the global batch; data-parallel and FSDP runs split it across ``gpus``.
* encoder-decoder models (T5 family): ``seq_len`` is the source the encoder reads and
  ``target_len`` (default ``seq_len``) the target the decoder writes; in generation ``prompt_len``
  is the source and ``gen_len`` the tokens the decoder generates.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import re
from collections.abc import Mapping
from typing import Literal, overload

from fleet_tui.core import caches
from fleet_tui.core.choices import (
    ENGINES,
    FRAMEWORKS,
    KINDS,
    KV_CACHE_DTYPES,
    LORA_TARGETS,
    MASTER_WEIGHTS,
    OFFLOAD_TARGETS,
    OPTIMIZERS,
    PRECISIONS,
    SERVING_MODES,
    SHARDINGS,
    Engine,
    Framework,
    KVCacheDtype,
    MasterWeights,
    OffloadTarget,
    Optimizer,
    Serving,
    Sharding,
    WeightPrecision,
    WorkloadKind,
)
from fleet_tui.core.errors import FieldError, UserError, escape_braces
from fleet_tui.core.modelspec import MAX_PARAMS, MIN_PARAMS, PARAMS_RANGE_TEXT, ModelArch, arch_for_params
from fleet_tui.core.records import FORBID_EXTRA, Record, record, validate
from fleet_tui.core.types import PositiveInt, UnitFraction

#: Serving engine assumed when none is given for a decoder-only model (continuous batching, paged
#: KV cache, CUDA graphs): the decode model before engines were named described exactly this class.
DEFAULT_ENGINE = "vllm"
#: ... and for an encoder-decoder (T5-family) model, which vLLM and SGLang do not serve.
DEFAULT_ENCODER_DECODER_ENGINE = "hf"

#: Sequence length assumed for a training workload given without one (memory and speed alike).
DEFAULT_TRAIN_SEQ_LEN = 2048


@record
class EngineConfig:
    """The serving engine and the knobs a user sets on it (inference), as one value: ``None`` is the
    engine's own default (:mod:`fleet_tui.core.perf.engines`). A :class:`Workload` holds them as
    fields of its own and hands them on together as :attr:`Workload.engine_config`."""

    engine: Engine | None = None
    kv_cache_dtype: KVCacheDtype = "auto"
    gpu_memory_utilization: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    expert_parallel: bool = False
    api_server_count: int | None = None


#: The engine knobs' field names (on EngineConfig and on Workload), in the order errors name them.
ENGINE_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(EngineConfig))


_HASHED_FIELDS = operator.attrgetter("kind", "params", "precision", "batch", "seq_len", "target_len", "prompt_len",
                                     "gen_len",
                                     "gpus", "sharding", "optimizer", "master_weights", "grad_checkpointing",
                                     "lora_rank", "engine", "kv_cache_dtype", "gpu_memory_utilization",
                                     "max_num_batched_tokens", "max_num_seqs", "expert_parallel", "api_server_count",
                                     "framework", "chunked_loss",
                                     "optimizer_in_backward", "offload", "compile", "selective_checkpointing",
                                     "tp", "pp", "zero", "micro_batch", "cp", "vpp", "sequence_parallel")


@record(kw_only=True)
class Workload(Record):
    """One workload. Built by :func:`parse_workload` (which checks every input itself) or by engine
    code; :meth:`with_` and :func:`fleet_tui.core.records.validate` check field types too. The
    cross-field rules (``__post_init__``) run on every construction and copy."""

    __pydantic_config__ = FORBID_EXTRA

    kind: WorkloadKind
    model: ModelArch | None = None  # None when only a parameter count is known
    params: PositiveInt | None = None  # used when model is None
    precision: WeightPrecision = "bf16"
    batch: PositiveInt = 1
    seq_len: PositiveInt | None = None  # training step shape, or one forward pass for inference
    target_len: PositiveInt | None = None  # encoder-decoder: decoder tokens per sequence (default seq_len)
    prompt_len: PositiveInt | None = None  # generation: prompt tokens
    gen_len: PositiveInt | None = None  # generation: new tokens
    optimizer: Optimizer = "adamw"
    master_weights: MasterWeights = "fp32"
    grad_checkpointing: bool = False
    lora_rank: PositiveInt = 16
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    gpus: PositiveInt = 1
    sharding: Sharding = "data"
    serving: Serving = "interactive"
    # --- serving engine (inference): see fleet_tui.core.perf.engines ---
    engine: Engine | None = None  # None: chosen by the model's shape (see default_engine)
    kv_cache_dtype: KVCacheDtype = "auto"  # auto = the compute dtype (16-bit for quantized weights)
    gpu_memory_utilization: UnitFraction | None = None  # None: the engine's default
    max_num_batched_tokens: PositiveInt | None = None  # None: the engine's default chunk
    max_num_seqs: PositiveInt | None = None  # None: the engine's default cap on sequences in flight
    expert_parallel: bool = False  # MoE: attention data parallel + experts split over the GPUs
    api_server_count: PositiveInt | None = None  # vLLM --api-server-count; None: one API server
    # --- training stack: see fleet_tui.core.sizing.stacks ---
    framework: Framework = "hf"
    chunked_loss: bool = False  # cross-entropy over chunks of the sequence (no full fp32 logits)
    optimizer_in_backward: bool = False  # each parameter stepped as its gradient is ready
    offload: tuple[OffloadTarget, ...] = ()  # kept in CPU memory between uses
    compile: bool = False  # torch.compile (fused elementwise ops keep fewer intermediates)
    selective_checkpointing: bool = False  # recompute only the cheap ops (attention core, activations)
    # parallel layout (None: from ``sharding``, or searched by sizing.layout); see footprint.Layout
    tp: PositiveInt | None = None
    pp: PositiveInt | None = None
    zero: Literal[0, 1, 2, 3] | None = None
    micro_batch: PositiveInt | None = None  # sequences per forward on one rank (gradient accumulation)
    cp: PositiveInt = 1  # context parallel: each sequence split over cp ranks (ring attention)
    vpp: PositiveInt = 1  # interleaved pipeline: model chunks (virtual stages) per pipeline rank
    sequence_parallel: bool = False  # Megatron SP: norms/dropout split over the TP group too

    def __post_init__(self) -> None:
        if self.model is None and self.params is None:
            raise ValueError("give a model or a parameter count")
        if self.engine is None:
            # a derived default, set once while the instance is built (frozen afterwards)
            object.__setattr__(self, "engine", default_engine(self.model))
        elif (self.model is not None and self.model.is_encoder_decoder
              and self.engine not in ENCODER_DECODER_ENGINES):
            raise ValueError(f"engine {self.engine} does not serve encoder-decoder models; "
                             f"use one of {', '.join(ENCODER_DECODER_ENGINES)}")
        if self.target_len is not None and not (self.model is not None and self.model.is_encoder_decoder
                                                and self.seq_len is not None):
            raise ValueError("target_len is the decoder length of an encoder-decoder model's training step "
                             "or forward pass (with seq_len)")
        if self.gen_len is not None and self.prompt_len is None:
            raise ValueError("gen_len needs prompt_len (generation = a prompt plus new tokens)")
        bad = [t for t in self.lora_targets if t not in LORA_TARGETS]
        if bad:
            raise ValueError(f"unknown LoRA target(s) {', '.join(bad)}; allowed: {', '.join(LORA_TARGETS)}")
        if self.micro_batch is not None and self.micro_batch > self.batch:
            raise ValueError(f"micro-batch {self.micro_batch} is larger than the global batch {self.batch}")
        if self.kind in ("training", "finetune") and self.precision in ("int8", "int4", "fp4"):
            raise ValueError(f"full training in {self.precision} is not supported; use kind qlora "
                             "(4-bit base + LoRA) or lora with precision bf16")

    def __hash__(self) -> int:
        # Equal workloads hash equal: these fields are a subset of what ``==`` compares. Every memo
        # lookup hashes its workload, and pydantic's default hash walks the nested model's ~30
        # fields too: 2.2 µs against 0.5 µs here, on a cached size_workload call of ~1.2 µs
        # (bench/bench_sizing.py).
        model = self.model
        return hash((_HASHED_FIELDS(self), model.id if model is not None else None))

    @property
    def engine_config(self) -> EngineConfig:
        """The serving engine and its knobs, together."""
        return EngineConfig(engine=self.engine, kv_cache_dtype=self.kv_cache_dtype,
                            gpu_memory_utilization=self.gpu_memory_utilization,
                            max_num_batched_tokens=self.max_num_batched_tokens, max_num_seqs=self.max_num_seqs,
                            expert_parallel=self.expert_parallel, api_server_count=self.api_server_count)

    @property
    def is_training(self) -> bool:
        return self.kind != "inference"

    @property
    def is_generation(self) -> bool:
        return self.kind == "inference" and self.gen_len is not None

    @property
    def is_adapter(self) -> bool:
        return self.kind in ("lora", "qlora")

    @property
    def arch(self) -> ModelArch:
        """The model shape: the given one, or a Llama-like shape with ``params`` parameters."""
        if self.model is not None:
            return self.model
        if self.params is None:  # __post_init__ requires a model or a parameter count
            raise ValueError("give a model or a parameter count")
        return _arch_for_params(int(self.params))

    @property
    def replica_gpus(self) -> int:
        """Devices one serving replica spans: all of them under tensor or expert parallelism (the
        experts are split over them), else one (the others are data-parallel replicas)."""
        return self.gpus if self.sharding == "tensor" or (self.expert_parallel and self.gpus > 1) else 1

    @property
    def tokens_per_step(self) -> int:
        """Tokens one step processes (training/forward: batch × seq_len; generation: the prompt)."""
        if self.seq_len is not None:
            return self.batch * self.seq_len
        if self.prompt_len is not None:
            return self.batch * self.prompt_len
        return 0

    def derive(self, **changes) -> "Workload":
        """A copy with ``changes`` applied, cheaply: cross-field rules are checked, field types are
        trusted (for engine-made variants; use :meth:`with_` for user input)."""
        return dataclasses.replace(self, **changes)

    def with_(self, **changes) -> "Workload":
        """A copy with ``changes`` applied and validated again."""
        data = self.model_dump()
        data["model"] = self.model
        data.update(changes)
        return validate(Workload, data)


def default_engine(model: ModelArch | None) -> str:
    """The serving engine a workload gets when none is named: vLLM for decoder-only models,
    Hugging Face for encoder-decoder ones (the one rule the API, the CLI and the builder share)."""
    if model is not None and model.is_encoder_decoder:
        return DEFAULT_ENCODER_DECODER_ENGINE
    return DEFAULT_ENGINE


_ARCH_FOR_PARAMS = caches.memo("workload.arch_for_params", 256)


def _arch_for_params(params: int) -> ModelArch:
    return _ARCH_FOR_PARAMS.get_or_compute(params, lambda: arch_for_params(params))


# --- reading a workload from a front end's inputs -------------------------------------------------
# Field names are the CLI's argparse dests; errors are FieldErrors naming them as {placeholders}, so
# the CLI shows its flags and the builder its form labels.

# Limits that catch typos without getting in the way of real runs.
MAX_BATCH = 1_000_000
MAX_TOKENS = 10_000_000  # longest context any published model supports (Llama-4-Scout: 10M)
MAX_API_SERVERS = 256  # one API-server process per CPU core at most; no host has more
MAX_GPUS = 65_536
MAX_LORA_RANK = 65_536

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_params(text: str | int, field: str = "params") -> int:
    """``7e9``, ``7B``, ``70b``, ``405M``, ``1.5T``, ``7_000_000_000`` -> an integer count (100M-100T)."""
    return _parse_amount(text, field, "a parameter count; write e.g. 7e9, 7B, 70b or 405M",
                         MIN_PARAMS, MAX_PARAMS, PARAMS_RANGE_TEXT)


#: A training run's tokens: a short fine-tune is a few million (52k Alpaca examples of ~300 tokens
#: are ~16M a pass); the largest published pre-training runs are ~15-36T (Llama 3, Qwen3). The
#: bound catches a unit typo, not a plan.
MAX_RUN_TOKENS = 10**15
RUN_TOKENS_RANGE_TEXT = "between 1 and 1,000T tokens"


def parse_run_tokens(text: str | int, field: str = "tokens") -> int:
    """A training run's length in tokens: ``50M``, ``2B``, ``1.5e9``, ``20_000_000`` (1 to 10^15)."""
    return _parse_amount(text, field, "a token count; write e.g. 50M, 2B, 1.5e9 or 20000000",
                         1, MAX_RUN_TOKENS, RUN_TOKENS_RANGE_TEXT)


def _parse_amount(text: str | int, field: str, what: str, lo: int, hi: int, range_text: str) -> int:
    raw = str(text).strip().replace("_", "").replace(",", "")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)", raw, re.IGNORECASE)
    shown = escape_braces(repr(text))
    if not m:
        raise FieldError(field, f"{{{field}}} {shown}: not {what}")
    value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if not math.isfinite(value) or value < lo or value > hi:
        raise FieldError(field, f"{{{field}}} {shown}: must be {range_text}")
    return int(round(value))


def parse_count(text: str | int | None, field: str, lo: int = 1, hi: int = MAX_TOKENS) -> int | None:
    """A whole number between ``lo`` and ``hi`` (``1_000``, ``1,000`` and ``1e3`` read too); None/'' -> None."""
    if text is None or str(text).strip() == "":
        return None
    raw = str(text).strip().replace("_", "").replace(",", "")
    bad = f"{{{field}}} {escape_braces(repr(text))}: not a whole number (allowed: {lo} to {hi:,})"
    try:
        value = float(raw) if re.fullmatch(r"[0-9.]+e[+-]?[0-9]+", raw, re.I) else int(raw)
    except ValueError:
        raise FieldError(field, bad) from None
    if isinstance(value, float):
        if not value.is_integer():
            raise FieldError(field, bad)
        value = int(value)
    if value < lo or value > hi:
        typed = str(text).strip()  # as typed: 1e30 as a whole number is 1000000000000000019884624838656
        shown = typed if len(typed) <= 40 else f"{typed[:20]}… ({len(typed)} characters)"
        raise FieldError(field, f"{{{field}}} {escape_braces(shown)}: out of range (allowed: {lo:,} to {hi:,})")
    return value


def _as_dict(fields) -> dict:
    if isinstance(fields, Mapping):
        return dict(fields)
    if dataclasses.is_dataclass(fields):
        return {f.name: getattr(fields, f.name) for f in dataclasses.fields(fields)}
    return dict(vars(fields))  # an argparse.Namespace


@overload
def _choice(d: dict, field: str, allowed: tuple[str, ...], default: str) -> str: ...
@overload
def _choice(d: dict, field: str, allowed: tuple[str, ...], default: None) -> str | None: ...


def _choice(d: dict, field: str, allowed: tuple[str, ...], default: str | None) -> str | None:
    value = d.get(field)
    if value in (None, ""):
        return default
    if value not in allowed:
        raise FieldError(field, f"{{{field}}} {escape_braces(repr(value))}: not one of {', '.join(allowed)}")
    return value


def _resolve_model(d: dict, catalog) -> tuple[ModelArch | None, int | None]:
    if d.get("model"):
        if catalog is None:
            raise FieldError("model", "{model} needs the catalog; none is loaded")
        return catalog.model(d["model"]), None
    if d.get("model_config"):
        from fleet_tui.core.modelconfig import load_model_config  # reads files: only when a path is given

        return load_model_config(d["model_config"]), None
    if d.get("params") not in (None, ""):
        return None, parse_params(d["params"])
    raise FieldError("model", "say which model: {model} NAME (see `fleet-tui catalog models`), "
                     "{model_config} PATH/config.json or {params} N (e.g. 7B)")


def parse_workload(fields, catalog=None) -> Workload:
    """The :class:`Workload` that a front end's inputs describe (a dict, a dataclass or an argparse
    namespace keyed by the field names above; text or numbers). Unset fields are ``None`` or absent.

    Raises :class:`~fleet_tui.core.errors.FieldError` naming the field(s) on any bad or conflicting
    value, with the allowed range or choices.
    """
    d = _as_dict(fields)
    kind = _choice(d, "workload", KINDS, "inference")
    precision = _choice(d, "precision", PRECISIONS, "bf16")
    training = kind != "inference"
    adapter = kind in ("lora", "qlora")
    model, params = _resolve_model(d, catalog)
    batch = parse_count(d.get("batch"), "batch", 1, MAX_BATCH) or 1
    per_device = parse_count(d.get("batch_per_device"), "batch_per_device", 1, MAX_BATCH)
    if per_device is not None:
        batch = _global_batch(d, per_device, kind)
    seq = parse_count(d.get("seq_len"), "seq_len")
    target = parse_count(d.get("target_len"), "target_len")
    prompt = parse_count(d.get("prompt_len"), "prompt_len")
    gen = parse_count(d.get("gen_len"), "gen_len")
    gpus = parse_count(d.get("gpus"), "gpus", 1, MAX_GPUS) or 1
    rank = parse_count(d.get("lora_rank"), "lora_rank", 1, MAX_LORA_RANK)

    _check_lengths(seq, prompt, gen, training, kind, model)
    _check_kind_fields(d, kind, precision, rank)

    kw: dict = dict(kind=kind, model=model, params=params, precision=precision, batch=batch,
                    seq_len=seq, target_len=target, prompt_len=prompt, gen_len=gen, gpus=gpus)
    if kind == "qlora" and precision in ("int4", "int8", "fp8", "fp4", "fp32"):
        kw["precision"] = "bf16"  # the NF4 base is implied; compute runs in bf16
    _training_choices(d, kw, adapter, rank)
    kw.update(_serving_fields(d, training))
    if kw.get("expert_parallel") and not (model is not None and model.is_moe):
        raise FieldError("expert_parallel", "{expert_parallel} splits the experts of a mixture-of-experts model; "
                         "this model has none")
    kw.update(_stack_fields(d, kind, kw))
    _encoder_decoder_fields(d, kw)
    if gpus > 1 and "sharding" not in kw and kw.get("framework") in ("torchtune", "torchtitan", "maxtext"):
        kw["sharding"] = "fsdp"  # FSDP2 full shard (torchtune, torchtitan); MaxText's ici_fsdp_parallelism
    _layout_fields(d, kw, gpus, training)
    gpus = kw["gpus"]
    if gpus > 1 and "sharding" not in kw:
        kw["sharding"] = "fsdp" if kind in ("training", "finetune") else ("tensor" if kind == "inference" else "data")
    if kw.get("sharding") == "tensor" and kw.get("tp") is None and model is not None and model.kv_heads and gpus > 1:
        if model.heads % gpus:
            raise FieldError("gpus", f"{{gpus}} {gpus} {{sharding}} tensor: {model.heads} attention heads of "
                             f"{escape_braces(model.name or model.id)} do not split evenly across {gpus} GPUs")
    try:  # every field was parsed above: only the cross-field rules remain to check
        return Workload(**kw)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _check_lengths(seq: int | None, prompt: int | None, gen: int | None, training: bool, kind: str,
                   model: ModelArch | None) -> None:
    """A generation is a prompt plus new tokens, a forward pass or training step is one length;
    either within four times the model's context window."""
    if gen is not None and prompt is None:
        raise FieldError("gen_len", "{gen_len} needs {prompt_len} (generation = a prompt plus new tokens)")
    if prompt is not None and gen is None:
        raise FieldError("prompt_len", "{prompt_len} needs {gen_len}; for one forward pass over the prompt "
                         "use {seq_len}")
    if seq is not None and prompt is not None:
        raise FieldError("seq_len", "give either {seq_len} (one forward pass / training step) or "
                         "{prompt_len} with {gen_len} (generation), not both")
    if training and prompt is not None:
        raise FieldError("prompt_len", f"{{prompt_len}}/{{gen_len}} describe generation; {{workload}} {kind} "
                         "takes {seq_len}")
    arch_max = model.max_position if model is not None else None
    for field, shown, value in (("seq_len", "{seq_len}", seq),
                                ("prompt_len", "{prompt_len} + {gen_len}", (prompt or 0) + (gen or 0) or None)):
        if value is not None and model is not None and arch_max and value > arch_max * 4:
            raise FieldError(field, f"{shown} {value}: far beyond {escape_braces(model.name or model.id)}'s "
                             f"context window of {arch_max:,} tokens")


def _check_kind_fields(d: dict, kind: str, precision: str, rank: int | None) -> None:
    """Training options only on training, adapter options only on adapters, and a precision that
    can train all weights."""
    training = kind != "inference"
    adapter = kind in ("lora", "qlora")
    if not training:
        for field in ("optimizer", "master_weights", "grad_checkpointing", "framework", "chunked_loss",
                      "optimizer_in_backward", "offload", "compile", "selective_checkpointing"):
            if d.get(field) not in (None, False, ""):
                raise FieldError(field, f"{{{field}}} applies to training workloads "
                                 "({workload} training|finetune|lora|qlora), not inference")
    if not adapter and (rank is not None or d.get("lora_targets")):
        raise FieldError("lora_rank", "{lora_rank}/{lora_targets} apply to {workload} lora or qlora")
    if kind in ("training", "finetune") and precision in ("int8", "int4", "fp4"):
        raise FieldError("precision", f"{{precision}} {precision} cannot train all weights; use {{workload}} "
                         "qlora (4-bit base + LoRA) or a 16-bit precision")


def _training_choices(d: dict, kw: dict, adapter: bool, rank: int | None) -> None:
    """The optimizer, master weights, sharding and serving choices, gradient checkpointing and the
    LoRA rank and target modules, set into ``kw``."""
    for field, allowed in (("optimizer", OPTIMIZERS), ("master_weights", MASTER_WEIGHTS),
                           ("sharding", SHARDINGS), ("serving", SERVING_MODES)):
        value = _choice(d, field, allowed, None)
        if value is not None:
            kw[field] = value
    if adapter:
        kw.setdefault("master_weights", "none")  # adapters train in fp32; the base stays 16-bit
    if d.get("grad_checkpointing"):
        kw["grad_checkpointing"] = True
    if rank is not None:
        kw["lora_rank"] = rank
    targets = d.get("lora_targets")
    if targets:
        names = [t.strip() for t in str(targets).split(",") if t.strip()]
        if names == ["all"]:
            names = list(LORA_TARGETS)
        bad = [t for t in names if t not in LORA_TARGETS]
        if bad or not names:
            raise FieldError("lora_targets", f"{{lora_targets}} {escape_braces(repr(targets))}: unknown module(s) "
                             f"{escape_braces(', '.join(bad)) or '(none)'}; "
                             f"allowed: {', '.join(LORA_TARGETS)} or 'all'")
        kw["lora_targets"] = tuple(dict.fromkeys(names))


def _global_batch(d: dict, per_device: int, kind: str) -> int:
    """The global batch of ``per_device`` sequences on each data-parallel rank (torchtune's and
    Transformers' ``batch_size`` / ``per_device_train_batch_size``, MaxText's per_device_batch_size):
    × gpus / (tp × pp × cp)."""
    if kind == "inference":
        raise FieldError("batch_per_device", "{batch_per_device} is a training batch size; inference takes {batch}")
    if d.get("batch") not in (None, ""):
        raise FieldError("batch_per_device", "give {batch} (global) or {batch_per_device}, not both")
    gpus = parse_count(d.get("gpus"), "gpus", 1, MAX_GPUS) or 1
    split = 1
    for f in ("tp", "pp", "cp"):
        split *= parse_count(d.get(f), f, 1, MAX_GPUS) or 1
    total = per_device * max(1, gpus // split)
    if total > MAX_BATCH:
        raise FieldError("batch_per_device", f"{{batch_per_device}} {per_device} on {gpus} GPUs is a global batch "
                         f"of {total:,}, beyond {MAX_BATCH:,}")
    return total


def _serving_fields(d: dict, training: bool) -> dict:
    """The serving engine and its knobs (inference only)."""
    kw: dict = {}
    given = [f for f in ENGINE_FIELDS if d.get(f) not in (None, "", False)]
    if training and given:
        raise FieldError(given[0], f"{{{given[0]}}} describes a serving engine; it applies to {{workload}} "
                         "inference")
    engine = _choice(d, "engine", ENGINES, None)
    if engine is not None:
        kw["engine"] = engine
    kv = _choice(d, "kv_cache_dtype", KV_CACHE_DTYPES, None)
    if kv is not None:
        kw["kv_cache_dtype"] = kv
    util = d.get("gpu_memory_utilization")
    if util not in (None, ""):
        try:
            value = float(util)
        except (TypeError, ValueError):
            value = -1.0
        if not 0.05 <= value <= 1.0:
            raise FieldError("gpu_memory_utilization", f"{{gpu_memory_utilization}} {escape_braces(repr(util))}: "
                             "a fraction of device memory between 0.05 and 1")
        kw["gpu_memory_utilization"] = value
    chunk = parse_count(d.get("max_num_batched_tokens"), "max_num_batched_tokens", 16, MAX_TOKENS)
    if chunk is not None:
        kw["max_num_batched_tokens"] = chunk
    seqs = parse_count(d.get("max_num_seqs"), "max_num_seqs", 1, MAX_TOKENS)
    if seqs is not None:
        kw["max_num_seqs"] = seqs
    if d.get("expert_parallel"):
        kw["expert_parallel"] = True
    servers = parse_count(d.get("api_server_count"), "api_server_count", 1, MAX_API_SERVERS)
    if servers is not None:
        if kw.get("engine", "vllm") != "vllm":
            raise FieldError("api_server_count", "{api_server_count} is a knob of vllm's API server; "
                             f"{{engine}} {kw['engine']} has none")
        kw["api_server_count"] = servers
    if kw.get("engine") == "hf":
        for f in ("gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs", "expert_parallel"):
            if f in kw:
                raise FieldError(f, f"{{{f}}} is a knob of vllm, sglang and trtllm; {{engine}} hf has none")
    return kw


def _stack_fields(d: dict, kind: str, kw: dict) -> dict:
    """The training stack: a framework preset, then the switches given explicitly on top of it."""
    out: dict = {}
    framework = _choice(d, "framework", FRAMEWORKS, None)
    if framework is not None:
        out["framework"] = framework
    if framework == "torchtune":
        # torchtune recipes: pure bf16 (no fp32 master copy, adapters in bf16 too), chunked
        # cross-entropy (CEWithChunkedOutputLoss) and activation checkpointing on by default
        out.update(chunked_loss=True, grad_checkpointing=True)
        if "master_weights" not in kw:
            out["master_weights"] = "none"
    if framework == "unsloth":
        # Unsloth: its own fused kernels, gradient checkpointing with the saved inputs offloaded to
        # CPU memory, a fused cross-entropy that never forms the logits, and 8-bit AdamW (the
        # optimizer of every training example in its README)
        out.update(chunked_loss=True, grad_checkpointing=True, offload=("activations",))
        if "master_weights" not in kw:
            out["master_weights"] = "none"
        if "optimizer" not in kw:
            out["optimizer"] = "adamw8bit"
    if framework in ("torchtitan", "megatron", "nemo", "maxtext", "neuronx"):
        # their defaults (core.frameworks): bf16 compute with fp32 master weights and optimizer
        # states sharded over the replicas; torchtitan/MaxText checkpoint (selective op / remat)
        if framework in ("torchtitan", "neuronx") and not d.get("grad_checkpointing"):
            out["selective_checkpointing"] = True
    if framework == "optimum-habana":
        out["grad_checkpointing"] = True  # GaudiTrainer examples pass --gradient_checkpointing
    for f in ("chunked_loss", "optimizer_in_backward", "compile", "selective_checkpointing"):
        if d.get(f):
            out[f] = True
    offload = d.get("offload")
    if offload:
        items = offload if isinstance(offload, (list, tuple)) else str(offload).split(",")
        names = [str(t).strip() for t in items if str(t).strip()]
        bad = [t for t in names if t not in OFFLOAD_TARGETS]
        if bad:
            raise FieldError("offload", f"{{offload}} {escape_braces(', '.join(bad))}: not one of "
                             f"{', '.join(OFFLOAD_TARGETS)} (comma-separated, combinable)")
        out["offload"] = tuple(t for t in OFFLOAD_TARGETS if t in names)
    return out
#: Serving engines that run T5-family encoder-decoder models: TensorRT-LLM (its enc_dec examples build
#: T5, Flan-T5 and BART engines) and Hugging Face; vLLM and SGLang serve decoder-only models.
ENCODER_DECODER_ENGINES = ("hf", "trtllm")
#: Training stacks with T5 support: Transformers + PEFT (alone or under DeepSpeed); torchtune's and
#: Unsloth's model builders are decoder-only.
ENCODER_DECODER_FRAMEWORKS = ("hf", "deepspeed")


def _encoder_decoder_fields(d: dict, kw: dict) -> None:
    """The encoder-decoder rules: ``target_len`` only for such a model (and not with generation,
    whose decoder length is ``gen_len``), the engines and stacks that run it. The default engine
    (``hf`` for such a model) is :func:`default_engine`'s, applied by :class:`Workload` itself."""
    model = kw.get("model")
    name = escape_braces(model.name or model.id) if model is not None else "this model"
    if model is None or not model.is_encoder_decoder:
        if kw.get("target_len") is not None:
            raise FieldError("target_len", f"{{target_len}} is the decoder length of an encoder-decoder (T5-family) "
                             f"model; {name} is decoder-only: give its tokens as {{seq_len}}")
        return
    if kw.get("target_len") is not None and kw.get("seq_len") is None:
        raise FieldError("target_len", "{target_len} goes with {seq_len} (the source the encoder reads); in "
                         "generation the decoder length is {gen_len}")
    engine = kw.get("engine")
    if engine is not None and engine not in ENCODER_DECODER_ENGINES:
        raise FieldError("engine", f"{{engine}} {engine} does not serve encoder-decoder models like {name}; "
                         f"use one of {', '.join(ENCODER_DECODER_ENGINES)}")
    framework = kw.get("framework")
    if framework is not None and framework not in ENCODER_DECODER_FRAMEWORKS:
        raise FieldError("framework", f"{{framework}} {framework} has no encoder-decoder models; {name} trains "
                         f"with {', '.join(ENCODER_DECODER_FRAMEWORKS)} (Transformers + PEFT)")


def _layout_fields(d: dict, kw: dict, gpus: int, training: bool) -> None:
    """``tp``/``pp``/``dp``/``zero``/``micro_batch`` into ``kw`` (checked against ``gpus``)."""
    tp = parse_count(d.get("tp"), "tp", 1, MAX_GPUS)
    pp = parse_count(d.get("pp"), "pp", 1, 4096)
    dp = parse_count(d.get("dp"), "dp", 1, MAX_GPUS)
    zero = parse_count(d.get("zero"), "zero", 0, 3) if d.get("zero") not in (None, "") else None
    micro = parse_count(d.get("micro_batch"), "micro_batch", 1, MAX_BATCH)
    cp = parse_count(d.get("cp"), "cp", 1, 1024)
    vpp = parse_count(d.get("vpp"), "vpp", 1, 1024)
    if (cp or vpp or d.get("sequence_parallel")) and not training:
        given = "cp" if cp else ("vpp" if vpp else "sequence_parallel")
        raise FieldError(given, f"{{{given}}} is a training layout (context/sequence parallel, interleaved "
                         "pipeline); it applies to {workload} training|finetune|lora|qlora")
    seq = kw.get("seq_len")
    if cp and cp > 1 and seq is not None and seq % (2 * cp):
        raise FieldError("cp", f"{{cp}} {cp}: the sequence of {seq} tokens does not split into 2 × {cp} "
                         "chunks (ring attention balances causal work over 2·cp chunks)")
    if cp and cp > 1:
        kw["cp"] = cp
    if d.get("sequence_parallel"):
        kw["sequence_parallel"] = True
    if vpp and vpp > 1:
        model = kw.get("model")
        layers = model.layers if model is not None else None
        stages = parse_count(d.get("pp"), "pp", 1, 4096) or 1
        if stages < 2:
            raise FieldError("vpp", f"{{vpp}} {vpp}: interleaving splits each pipeline rank's layers into chunks; "
                             "it needs {pp} 2 or more")
        if layers and layers < stages * vpp:
            raise FieldError("vpp", f"{{vpp}} {vpp}: {layers} layers are fewer than {{pp}} {stages} × "
                             f"{vpp} chunks of at least one layer")
        kw["vpp"] = vpp
    if micro is not None and micro > kw["batch"]:
        raise FieldError("micro_batch", f"{{micro_batch}} {micro} is larger than the global {{batch}} {kw['batch']}")
    if zero is not None and not training and zero != 3:
        raise FieldError("zero", "{zero} 1 and 2 shard optimizer states and gradients: training only")
    if tp is None and pp is None and dp is None and zero is None and not (cp and cp > 1):
        if micro is not None:
            kw["micro_batch"] = micro
        return
    model = kw.get("model")
    if tp and model is not None and model.heads % tp:
        raise FieldError("tp", f"{{tp}} {tp}: {model.heads} attention heads of "
                         f"{escape_braces(model.name or model.id)} do not split evenly")
    split = (tp or 1) * (pp or 1) * kw.get("cp", 1)
    if dp is not None:
        need = split * dp
        if d.get("gpus") in (None, ""):
            kw["gpus"] = gpus = need
        elif need != gpus:
            raise FieldError("dp", f"{{tp}} × {{pp}} × {{cp}} × {{dp}} = {need} devices, but {{gpus}} is {gpus}")
    if split > gpus:
        raise FieldError("tp", f"{{tp}} × {{pp}} × {{cp}} = {split} devices, more than {{gpus}} {gpus}")
    if gpus % split:
        raise FieldError("gpus", f"{{gpus}} {gpus} is not a multiple of {{tp}} × {{pp}} × {{cp}} = {split}")
    if zero is None:  # FSDP when asked for; else Megatron's distributed optimizer (ZeRO-1) for training
        zero = 3 if kw.get("sharding") == "fsdp" else (1 if training else 0)
    kw.update(tp=tp or 1, pp=pp or 1, zero=zero)
    if micro is not None:
        kw["micro_batch"] = micro
    if gpus > 1 and "sharding" not in kw:
        kw["sharding"] = "fsdp" if kw["zero"] == 3 else ("tensor" if tp and tp > 1 else "data")
