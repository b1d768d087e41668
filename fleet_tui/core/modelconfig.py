"""Hugging Face ``config.json`` files read into a :class:`~fleet_tui.core.modelspec.ModelArch`.

The key names of the decoder families (Llama, Mistral, Qwen2/Qwen2-MoE/Qwen3(-MoE), Gemma, Mixtral,
GPT-NeoX/GPT-2-style, DeepSeek-V2/V3's latent attention, hybrid linear/full attention) and of the T5
family's ``T5Config``, read offline. Every problem is a :class:`~fleet_tui.core.errors.UserError`
naming the file (and line, for syntax) and the key; the shape's parameter count is held to the same
bounds as ``{params}`` (:func:`~fleet_tui.core.modelspec.check_param_bounds`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from fleet_tui.core.errors import FieldError, UserError, escape_braces
from fleet_tui.core.fsutil import InputFileError, open_regular
from fleet_tui.core.jsonio import parse_json
from fleet_tui.core.modelspec import ModelArch, check_param_bounds
from fleet_tui.core.records import validate

#: A config.json is a few KB; read at most this much, so ``/dev/zero`` or a wrong multi-GB file
#: fails at once instead of filling memory.
MAX_CONFIG_BYTES = 4 * 2**20

#: Bounds of the sizes read from a config.json (the largest published configs are far inside:
#: vocabularies of ~262k, hidden sizes of ~25k, Llama 4 Scout's 10,485,760 positions).
MAX_SIZE = 10_000_000
MAX_POSITIONS = 1_000_000_000

#: ModelArch's field names → the config.json keys they are read from, for pydantic's messages.
CONFIG_KEYS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
               "kv_heads": "num_key_value_heads", "vocab": "vocab_size",
               "intermediate": "intermediate_size", "max_position": "max_position_embeddings",
               "moe_intermediate": "moe_intermediate_size"}


def _user_error(msg: str) -> UserError:
    return UserError(msg)


def _first(cfg: dict, *keys: str) -> Any:  # a JSON value
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return None


def _whole(v) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool) and v > 0) or (
        isinstance(v, float) and math.isfinite(v) and v > 0 and v.is_integer())


def _size(cfg: dict, p: Path, hi: int, *keys: str) -> Any:  # a JSON value, checked
    """The first of ``keys`` that the config sets, refused naming that key unless it is a whole
    number from 1 to ``hi``; ``None`` when none is set."""
    for key in keys:
        v = cfg.get(key)
        if v is not None:
            if not _whole(v) or v > hi:
                raise _user_error(f"{p}: {key} {v!r}: must be a whole number from 1 to {hi:,}")
            return v
    return None


def _count(cfg: dict, p: Path, hi: int, *keys: str) -> int:
    """Like :func:`_size`, for counts a dense model sets to 0 (experts): 0 when none is set."""
    for key in keys:
        v = cfg.get(key)
        if v is not None:
            if v != 0 and (not _whole(v) or v > hi):
                raise _user_error(f"{p}: {key} {v!r}: must be a whole number from 0 to {hi:,}")
            return int(v)
    return 0


def _check_layer_types(cfg: dict, layers: int, p: Path, text: str) -> None:
    """``layer_types`` must list one kind per layer (transformers' ``layer_type_validation``
    checks the same), or which layers are sliding or linear is unknown."""
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and len(kinds) != layers:
        line = next((i for i, row in enumerate(text.splitlines(), 1) if '"layer_types"' in row), None)
        where = f"{p}:{line}" if line else str(p)
        raise _user_error(f"{where}: layer_types lists {len(kinds)} kind(s) but num_hidden_layers is "
                          f"{layers}: give one kind per layer")


def load_model_config(path: str | os.PathLike) -> ModelArch:
    """Read a local Hugging Face ``config.json`` (offline) into a :class:`ModelArch`.

    Understands the key names of Llama, Mistral, Qwen2/Qwen2-MoE/Qwen3(-MoE), Gemma/Gemma-2,
    Mixtral and GPT-NeoX/GPT-2-style configs (``n_layer``/``n_embd``...), and multimodal wrappers
    that nest the language model under ``text_config``. Raises ``UserError`` naming the file and
    the missing or bad keys.
    """
    p, cfg, text = _read_config(path)
    model_type = str(cfg.get("model_type", "")).lower()
    layers, hidden, heads, vocab, inter, gated = _dense_shape(cfg, model_type, p)
    _check_layer_types(cfg, int(layers), p, text)
    max_position = _size(cfg, p, MAX_POSITIONS, "max_position_embeddings", "n_positions", "seq_length")
    kv = _first(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
    if kv is None:
        kv = 1 if cfg.get("multi_query") else heads
    experts, per_tok, moe_inter, shared, inter = _experts(cfg, inter, p)
    window, window_layers = _sliding_window(cfg, model_type, int(layers))
    name = str(cfg.get("_name_or_path") or (p.parent.name if p.name == "config.json" else p.stem) or "model")
    extra = _mla_and_hybrid(cfg, int(layers))
    if model_type in ENCODER_DECODER_TYPES:
        extra.update(_t5_fields(cfg, int(layers), p))
        gated = str(cfg.get("feed_forward_proj", "relu")).startswith("gated")
    try:
        arch = validate(ModelArch, dict(
            id=name.split("/")[-1].lower() or "model-config",
            name=name,
            family=model_type,
            layers=layers, hidden=hidden, intermediate=inter, heads=heads, kv_heads=kv,
            head_dim=extra.pop("head_dim", cfg.get("head_dim")), vocab=vocab,
            # transformers' default is model-specific: Gemma and GPT-2 tie, Llama/Mistral/Qwen2 do not
            tied_embeddings=bool(cfg.get("tie_word_embeddings", model_type.startswith(("gemma", "gpt2"))
                                         or model_type in ENCODER_DECODER_TYPES)),
            experts=int(experts) if per_tok else 0,
            experts_per_token=int(per_tok) if experts else 0,
            moe_intermediate=moe_inter if experts else None,
            shared_experts=int(shared) if experts else 0,
            max_position=max_position,
            attention_bias=bool(cfg.get("attention_bias", model_type.startswith("qwen2"))),
            gated_mlp=gated,
            sliding_window=window, sliding_window_layers=window_layers,
            post_norms=model_type.startswith(("gemma2", "gemma3")),
            logit_softcap=cfg.get("final_logit_softcapping"),
            attn_softcap=cfg.get("attn_logit_softcapping"),
            attention="eager" if cfg.get("_attn_implementation") == "eager" or extra.get("decoder_layers") else "sdpa",
            source=str(p), **extra,
        ))
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        from pydantic import ValidationError  # imported already: validate() raised it

        if not isinstance(exc, ValidationError):
            raise
        bad = "; ".join(f"{'.'.join(CONFIG_KEYS.get(str(x), str(x)) for x in e['loc']) or 'config'}: "
                        f"{e['msg']}" for e in exc.errors())
        raise _user_error(f"{p}: {bad}") from None
    check_param_bounds(arch, str(p))
    return arch


def _read_config(path: str | os.PathLike) -> tuple[Path, dict, str]:
    """The file's path, its JSON object (a multimodal wrapper's ``text_config``, keeping the
    wrapper's tying and name) and its text: bounded, UTF-8, an object, or a ``UserError`` naming
    the file."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    try:
        with open_regular(p, "model config") as fh:  # a FIFO or /dev/zero: refused, not read
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except InputFileError as exc:
        if p.exists():
            raise FieldError("model_config", f"{{model_config}} {escape_braces(str(exc))}") from None
        raise FieldError("model_config", f"{{model_config}} {escape_braces(str(path))}: no such file (give a "
                         "Hugging Face config.json or the folder holding one)") from None
    except FileNotFoundError:
        raise FieldError("model_config", f"{{model_config}} {escape_braces(str(path))}: no such file (give a "
                         "Hugging Face config.json or the folder holding one)") from None
    except OSError as exc:
        raise FieldError("model_config", f"{{model_config}} {escape_braces(str(path))}: cannot read it "
                         f"({escape_braces(str(exc.strerror))})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise _user_error(f"{p}: larger than {MAX_CONFIG_BYTES // 2**20} MiB; a Hugging Face "
                          "config.json is a few KB (is this the model's weights, or a device?)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise _user_error(f"{p}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                          f"{exc.start}); give the model's config.json") from None
    cfg = parse_json(text, str(p), _user_error)
    if not isinstance(cfg, dict):
        raise _user_error(f"{p}: expected a JSON object with the model's hyper-parameters")
    if isinstance(cfg.get("text_config"), dict):  # Llava, Gemma-3, Llama-4 wrappers
        inner = dict(cfg["text_config"])
        for k in ("tie_word_embeddings", "_name_or_path"):
            if k in cfg and k not in inner:
                inner[k] = cfg[k]
        cfg = inner
    return p, cfg, text


def _dense_shape(cfg: dict, model_type: str, p: Path) -> tuple[Any, Any, Any, Any, Any, bool]:
    """Layers, hidden, heads, vocab, MLP width (GPT-2 style configs default it to 4 × hidden) and
    whether the MLP is gated; ``UserError`` on a missing or non-whole size or an encoder-decoder
    family that is not modelled."""
    layers = _size(cfg, p, MAX_SIZE, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    hidden = _size(cfg, p, MAX_SIZE, "hidden_size", "n_embd", "d_model", "dim")
    heads = _size(cfg, p, MAX_SIZE, "num_attention_heads", "n_head", "num_heads", "n_heads")
    vocab = _size(cfg, p, MAX_SIZE, "vocab_size", "padded_vocab_size")
    inter = _size(cfg, p, MAX_SIZE, "intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size", "d_ff")
    missing = [name for name, v in (("num_hidden_layers", layers), ("hidden_size", hidden),
                                    ("num_attention_heads", heads), ("vocab_size", vocab)) if v is None]
    if cfg.get("is_encoder_decoder") and model_type not in ENCODER_DECODER_TYPES:
        raise _user_error(f"{p}: model_type {model_type or '(none)'} is an encoder-decoder model; of those "
                          f"only the T5 family ({', '.join(ENCODER_DECODER_TYPES)}) is modelled")
    gated = model_type not in ("gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "phi")
    if inter is None and hidden is not None and not gated:
        inter = 4 * int(hidden)  # GPT-2 style configs leave n_inner null = 4 × hidden
    if inter is None:
        missing.append("intermediate_size")
    if missing:
        raise _user_error(f"{p}: missing key(s) {', '.join(missing)} (a Hugging Face decoder config "
                          "needs num_hidden_layers, hidden_size, num_attention_heads, "
                          "intermediate_size and vocab_size)")
    return layers, hidden, heads, vocab, inter, gated


def _experts(cfg: dict, inter: Any, p: Path) -> tuple[Any, Any, Any, Any, Any]:
    """Experts, experts per token, expert MLP width, shared experts, and the dense MLP width (Qwen2-MoE's
    shared expert has a width of its own)."""
    experts = _count(cfg, p, MAX_SIZE, "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
    per_tok = _count(cfg, p, MAX_SIZE, "num_experts_per_tok", "num_experts_per_token", "moe_top_k", "top_k")
    moe_inter = _size(cfg, p, MAX_SIZE, "moe_intermediate_size", "expert_intermediate_size")
    shared = _count(cfg, p, MAX_SIZE, "n_shared_experts", "num_shared_experts")
    if experts and not shared and cfg.get("shared_expert_intermediate_size"):
        shared = 1  # Qwen2-MoE: one shared expert of its own width
        inter = _size(cfg, p, MAX_SIZE, "shared_expert_intermediate_size")
    return experts, per_tok, moe_inter, shared, inter


def _sliding_window(cfg: dict, model_type: str, layers: int) -> tuple[Any, int]:
    """The sliding window and how many layers use it; ``(None, 0)`` when none does."""
    window = cfg.get("sliding_window")
    window_layers = 0
    kinds = cfg.get("layer_types")
    if window and isinstance(kinds, list) and kinds and cfg.get("use_sliding_window", True) is not False:
        # the config says which layers are local (gpt-oss, Gemma 2/3, Qwen3 in recent transformers):
        # the others keep every token
        window_layers = sum(1 for k in kinds if "sliding" in str(k))
    elif window and cfg.get("use_sliding_window", True) is not False:
        pattern: Any = cfg.get("sliding_window_pattern")  # a JSON value, checked by _whole
        if model_type.startswith("gemma3") and _whole(pattern):
            window_layers = layers - layers // int(pattern)  # every pattern-th layer is global
        elif model_type.startswith("gemma2") or model_type.startswith("gemma3"):
            window_layers = layers // 2 if model_type.startswith("gemma2") else layers - layers // 6
        elif model_type.startswith("qwen2"):
            window_layers = 0  # Qwen2 ships sliding_window but use_sliding_window false by default
        else:
            window_layers = layers
    if not window_layers:
        window = None
    return window, window_layers


#: Encoder-decoder model types read as the T5 shape (transformers' T5Config keys; T0/mT0/Flan-T5
#: checkpoints declare t5 or mt5).
ENCODER_DECODER_TYPES = ("t5", "mt5")


def _t5_fields(cfg: dict, layers: int, p: Path) -> dict:
    """ModelArch fields of a T5Config: ``num_decoder_layers`` defaults to ``num_layers``, heads are
    ``num_heads`` of ``d_kv`` channels (independent of ``d_model``), and transformers runs T5's
    attention eagerly (its relative-position bias is added to materialized scores)."""
    dec = cfg.get("num_decoder_layers") or layers
    if not _whole(dec):
        raise _user_error(f"{p}: num_decoder_layers {dec!r}: not a positive whole number")
    return dict(decoder_layers=int(dec), head_dim=cfg.get("d_kv"),
                relative_attention_buckets=int(cfg.get("relative_attention_num_buckets") or 32))


def _mla_and_hybrid(cfg: dict, layers: int) -> dict:
    """ModelArch fields of multi-head latent attention (DeepSeek-V2/V3 keys) and hybrid attention
    (``layer_types`` lists, or Qwen3-Next's ``full_attention_interval``)."""
    out: dict = {}
    if cfg.get("kv_lora_rank"):
        rope = int(cfg.get("qk_rope_head_dim") or 0)
        out = dict(kv_lora_rank=cfg["kv_lora_rank"], q_lora_rank=cfg.get("q_lora_rank") or 0,
                   qk_rope_head_dim=rope, v_head_dim=cfg.get("v_head_dim"),
                   head_dim=int(cfg.get("qk_nope_head_dim") or 0) + rope or None,
                   first_dense_layers=int(cfg.get("first_k_dense_replace") or 0))
        if cfg.get("n_shared_experts") and cfg.get("moe_intermediate_size"):
            out["shared_intermediate"] = cfg["moe_intermediate_size"]
    if cfg.get("linear_num_value_heads"):  # Gated DeltaNet: a k x v state per value head + conv window
        kd, vd = int(cfg.get("linear_key_head_dim") or 0), int(cfg.get("linear_value_head_dim") or 0)
        vh, kh = int(cfg["linear_num_value_heads"]), int(cfg.get("linear_num_key_heads") or 0)
        conv = int(cfg.get("linear_conv_kernel_dim") or 0) * (2 * kh * kd + vh * vd)
        out["linear_state_values"] = vh * kd * vd + conv
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and any(str(k).startswith("linear") for k in kinds):
        out["full_attention_layers"] = sum(1 for k in kinds if k == "full_attention") or None
    elif _whole(cfg.get("full_attention_interval")):
        out["full_attention_layers"] = layers // int(cfg["full_attention_interval"]) or None
    return out
