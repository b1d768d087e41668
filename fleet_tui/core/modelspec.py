"""Model architectures: the published shape of a transformer, from models.toml or a config.json
(read by :mod:`fleet_tui.core.modelconfig`).

Owned by the sizing code; the catalog loader validates ``catalogs/models.toml`` entries with
``ModelArch``. Parameter counts are derived from the shape (:func:`param_count`), never typed in.

The shape covers decoder-only transformers of the Llama family and its relatives: grouped-query
attention (``kv_heads`` < ``heads``), an explicit ``head_dim`` (Gemma-2, Qwen3), q/k/v biases
(Qwen2), tied input/output embeddings (Llama-3.2-1B/3B, Gemma-2), sliding-window layers
(Mistral-v0.1, Gemma-2) and mixture-of-experts feed-forward layers (Mixtral, Qwen-MoE) with optional
shared experts, multi-head latent attention with dense first layers (DeepSeek-V2/V3: a compressed
KV latent, low-rank projections) and hybrid linear/full attention (only ``full_attention_layers``
keep a KV cache).

Encoder-decoder transformers of the T5 family (T5, T5 v1.1, mT5, T0, mT0, Flan-T5; Raffel et al.,
arXiv:1910.10683) are a second shape: ``layers`` encoder blocks (self-attention + FFN) read the
source, ``decoder_layers`` decoder blocks (causal self-attention + cross-attention over the encoder
output + FFN) write the target. Both share one embedding; v1.1/mT5 add an untied output head. Each
stack's first self-attention holds a relative-position bias of ``relative_attention_buckets`` ×
heads values. Only the decoder keeps a KV cache: its self-attention one grows with the generated
tokens, its cross-attention one is fixed by the source length.
"""

from __future__ import annotations

from typing import Literal

from fleet_tui.core import caches
from fleet_tui.core.errors import FieldError, escape_braces
from fleet_tui.core.records import FORBID_EXTRA, Record, record
from fleet_tui.core.types import NonEmptyStr, NonNegativeInt, PositiveFloat, PositiveInt


@record(kw_only=True)
class ModelArch(Record):
    """One model's shape. Field types are checked by :func:`fleet_tui.core.records.validate` when
    read from a file; the cross-field rules run on every construction."""

    __pydantic_config__ = FORBID_EXTRA

    id: NonEmptyStr
    name: str = ""
    family: str = ""
    layers: PositiveInt
    hidden: PositiveInt
    intermediate: PositiveInt
    heads: PositiveInt
    kv_heads: PositiveInt
    head_dim: PositiveInt | None = None  # default hidden // heads
    vocab: PositiveInt
    tied_embeddings: bool = False
    # Mixture of experts: ``experts`` routed experts per MoE layer, ``experts_per_token`` active.
    experts: NonNegativeInt = 0
    experts_per_token: NonNegativeInt = 0
    moe_intermediate: PositiveInt | None = None  # expert FFN width when it differs from intermediate
    shared_experts: NonNegativeInt = 0
    max_position: PositiveInt | None = None
    source: str = ""
    # --- added by the sizing code (all optional, defaults = Llama-style) ---
    attention_bias: bool = False  # q/k/v projections carry a bias (Qwen2)
    gated_mlp: bool = True  # SwiGLU/GeGLU: gate, up and down projections (3 matrices)
    sliding_window: PositiveInt | None = None  # tokens a local-attention layer keeps in its KV cache
    sliding_window_layers: NonNegativeInt = 0  # how many layers use the window (0 = none)
    post_norms: bool = False  # extra norms after attention and after the MLP (Gemma-2/3 "sandwich")
    logit_softcap: PositiveFloat | None = None  # final-logit soft-capping (Gemma-2)
    attn_softcap: PositiveFloat | None = None  # attention-score soft-capping (Gemma-2)
    # how Hugging Face runs attention: "sdpa" (its default for every catalog model, Gemma-2 included
    # since transformers 4.47) keeps no score matrix; "eager" materializes sequence × sequence scores
    attention: Literal["sdpa", "eager"] = "sdpa"
    # set for shapes derived from a bare parameter count: counts are scaled to exactly this total
    total_params: PositiveInt | None = None
    # Multi-head latent attention (DeepSeek-V2/V3): the cache keeps one latent of kv_lora_rank +
    # qk_rope_head_dim values per token and layer for all heads (every tensor rank holds it whole);
    # head_dim is then the q/k head width (nope + rope), v_head_dim the value width
    kv_lora_rank: NonNegativeInt = 0
    q_lora_rank: NonNegativeInt = 0  # 0: a plain q_proj
    qk_rope_head_dim: NonNegativeInt = 0
    v_head_dim: PositiveInt | None = None
    first_dense_layers: NonNegativeInt = 0  # MoE models whose first layers are dense (DeepSeek)
    shared_intermediate: PositiveInt | None = None  # width of each shared expert (default intermediate)
    # hybrid attention (Qwen3-Next/3.5): only these layers keep a KV cache that grows with the
    # context; the others are linear attention with a fixed-size state (None: every layer)
    full_attention_layers: PositiveInt | None = None
    linear_state_values: NonNegativeInt = 0  # fixed state per sequence per linear-attention layer
    # encoder-decoder (T5 family): ``layers`` are then the encoder blocks and these the decoder ones
    decoder_layers: NonNegativeInt = 0
    relative_attention_buckets: NonNegativeInt = 0  # T5 relative-position bias (per stack, per head)

    def __post_init__(self) -> None:
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.experts and not (0 < self.experts_per_token <= self.experts):
            raise ValueError("experts_per_token must be between 1 and experts for a MoE model")
        if self.sliding_window_layers > self.layers:
            raise ValueError("sliding_window_layers cannot exceed layers")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding_window_layers needs sliding_window")
        if max(self.first_dense_layers, self.full_attention_layers or 0) > self.layers:
            raise ValueError("first_dense_layers and full_attention_layers cannot exceed layers")
        if self.decoder_layers and (self.is_moe or self.kv_lora_rank or self.sliding_window_layers
                                    or self.full_attention_layers or self.total_params):
            raise ValueError("an encoder-decoder shape (decoder_layers) has dense blocks with full "
                             "attention: no experts, latent attention, sliding windows or total_params")

    def __hash__(self) -> int:
        # Equal shapes hash equal (these fields are a subset of what ``==`` compares). Every memo
        # keyed on a model hashes it; the generated hash walks all ~36 fields (a first ranking of
        # the bundled catalog hashes a model ~700 times: 3.7 % of its work, bench/bench_recommend.py).
        return hash((self.id, self.layers, self.hidden, self.intermediate, self.heads, self.kv_heads, self.vocab))

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def eager_attention(self) -> bool:
        """Eager attention stores the sequence × sequence score matrix (set ``attention = "eager"``;
        Gemma-2 users often do, as transformers recommends eager for training it)."""
        return self.attention == "eager"

    @property
    def q_dim(self) -> int:
        """Width of the attention output (heads × head_dim); differs from hidden for Gemma/Qwen3."""
        return self.heads * self.dim_per_head

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) per token per layer: kv_heads × head_dim."""
        return self.kv_heads * self.dim_per_head

    @property
    def is_encoder_decoder(self) -> bool:
        return self.decoder_layers > 0

    @property
    def kv_layers(self) -> int:
        """Layers whose KV cache grows with the context (hybrid models: the full-attention ones;
        encoder-decoder: the decoder's, whose cross-attention K/V per source token are as wide as
        its self-attention K/V per generated token)."""
        if self.decoder_layers:
            return self.decoder_layers
        return (self.full_attention_layers or self.layers) - self.sliding_window_layers

    @property
    def attention_blocks(self) -> int:
        """Attention sub-layers (q/k/v/o sets): one per layer; a T5 decoder layer has two (self, cross)."""
        return self.layers + 2 * self.decoder_layers

    @property
    def ffn_blocks(self) -> int:
        """Feed-forward sub-layers: one per layer of every stack."""
        return self.layers + self.decoder_layers

    @property
    def expert_intermediate(self) -> int:
        return self.moe_intermediate or self.intermediate

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    def param_count(self) -> int:
        """Total stored parameters (see :func:`param_count`)."""
        return param_counts(self).total

    def active_param_count(self) -> int:
        """Parameters used per token (MoE: routed + shared experts)."""
        return param_counts(self).active


@record
class ParamCounts:
    """Parameter counts of a model, split the way memory and FLOPs need them."""

    total: int  # every stored parameter (tied embeddings counted once)
    active: int  # parameters touched per token (MoE: only the routed experts + shared ones)
    embedding: int  # input embedding table
    lm_head: int  # output projection (0 when tied to the embedding)
    attention_per_layer: int
    mlp_per_layer: int  # all experts for MoE
    mlp_active_per_layer: int
    norms: int  # norm weights (and T5's relative-position biases): neither matmuls nor embeddings
    # encoder-decoder: matmul parameters of the encoder blocks, which only source tokens pass
    # through (0 for a decoder-only model)
    encoder_matmul: int = 0

    @property
    def decoder(self) -> int:
        """Parameters in the decoder layers (what int8/int4 quantizers convert)."""
        return self.total - self.embedding - self.lm_head - self.norms

    @property
    def matmul_total(self) -> int:
        """Parameters used as matmul weights (decoder linears + the output projection)."""
        return self.decoder + (self.lm_head or self.embedding)

    @property
    def matmul_active(self) -> int:
        """Matmul weights touched per token: 2 × this = forward FLOPs per token (without attention)."""
        return self.active - self.embedding - self.lm_head - self.norms + (self.lm_head or self.embedding)

    @property
    def matmul_per_target_token(self) -> int:
        """Matmul weights a decoder token passes (encoder-decoder: the decoder blocks + head)."""
        return self.matmul_active - self.encoder_matmul


_PARAM_COUNTS = caches.memo("modelspec.param_counts", 1024)


def param_counts(arch: ModelArch) -> ParamCounts:
    """Parameters of ``arch`` by group (cached per model shape)."""
    return _PARAM_COUNTS.get_or_compute(arch, lambda: _param_counts(arch))


def _param_counts(arch: ModelArch) -> ParamCounts:
    h, L = arch.hidden, arch.layers
    attn = h * arch.q_dim + 2 * h * arch.kv_dim + arch.q_dim * h
    if arch.decoder_layers:
        return _encoder_decoder_counts(arch, attn)
    if arch.kv_lora_rank:  # MLA: low-rank q and kv projections, values of v_head_dim
        r, v = arch.kv_lora_rank, arch.v_head_dim or arch.dim_per_head
        q = arch.q_lora_rank * (h + arch.q_dim) if arch.q_lora_rank else h * arch.q_dim
        attn = q + h * (r + arch.qk_rope_head_dim) + r * arch.heads * (arch.dim_per_head - arch.qk_rope_head_dim + v) \
            + arch.heads * v * h
    if arch.attention_bias:
        attn += arch.q_dim + 2 * arch.kv_dim
    m = arch.mlp_matrices
    if arch.is_moe:
        expert = m * h * arch.expert_intermediate
        shared = arch.shared_experts * m * h * (arch.shared_intermediate or arch.intermediate)
        router = h * arch.experts
        mlp = arch.experts * expert + shared + router
        mlp_active = arch.experts_per_token * expert + shared + router
        if arch.first_dense_layers:  # per-layer figures are the mean over dense and MoE layers
            dense, k = m * h * arch.intermediate, arch.first_dense_layers
            mlp = (k * dense + (L - k) * mlp) // L
            mlp_active = (k * dense + (L - k) * mlp_active) // L
    else:
        mlp = mlp_active = m * h * arch.intermediate
    # two RMSNorm/LayerNorm weights per layer (four with post-norms) + the final one
    norms = ((4 if arch.post_norms else 2) * L + 1) * h
    emb = arch.vocab * h
    head = 0 if arch.tied_embeddings else arch.vocab * h
    if arch.total_params:  # a derived shape: scale the decoder so the total is exact
        scale = max(0.0, (arch.total_params - norms - emb - head) / (L * (attn + mlp)))
        attn, mlp, mlp_active = (int(round(x * scale)) for x in (attn, mlp, mlp_active))
        decoder = arch.total_params - norms - emb - head
        total = arch.total_params
        active = decoder - L * (mlp - mlp_active) + norms + emb + head
        return ParamCounts(total, active, emb, head, attn, mlp, mlp_active, norms)
    total = L * (attn + mlp) + norms + emb + head
    active = L * (attn + mlp_active) + norms + emb + head
    return ParamCounts(total, active, emb, head, attn, mlp, mlp_active, norms)


def _encoder_decoder_counts(arch: ModelArch, attn: int) -> ParamCounts:
    """T5-family counts (transformers' T5ForConditionalGeneration): an encoder block is self-attention
    + FFN with a norm before each (2 norms), a decoder block self-attention + cross-attention + FFN
    (3 norms, the cross-attention as wide as the self-attention); each stack has a final norm and one
    relative-position bias (buckets × heads) in its first block; no biases anywhere. The per-layer
    figures are a decoder block's (the largest), which is what gathering or offloading a layer moves."""
    h = arch.hidden
    mlp = arch.mlp_matrices * h * arch.intermediate
    enc, dec = arch.layers * (attn + mlp), arch.decoder_layers * (2 * attn + mlp)
    norms = (2 * arch.layers + 3 * arch.decoder_layers + 2) * h + 2 * arch.relative_attention_buckets * arch.heads
    emb = arch.vocab * h
    head = 0 if arch.tied_embeddings else arch.vocab * h
    total = enc + dec + norms + emb + head
    return ParamCounts(total, total, emb, head, 2 * attn, mlp, mlp, norms, encoder_matmul=enc)


def param_count(arch: ModelArch) -> int:
    """Total stored parameters (tied embeddings once; MoE: all experts)."""
    return param_counts(arch).total


def active_param_count(arch: ModelArch) -> int:
    """Parameters used per token (MoE: routed experts_per_token + shared experts)."""
    return param_counts(arch).active


def _shape_params(hidden: int, vocab: int) -> int:
    layers = max(2, hidden // 128)
    return layers * (2 * hidden * hidden + 2 * hidden * (hidden // 4) + 3 * hidden * (7 * hidden // 2)) \
        + 2 * vocab * hidden


# The one set of bounds on a model's parameter count, whether typed ({params}) or derived from a
# config.json ({model_config}): they catch typos (a 1e12 hidden size, --params 1e15) without getting
# in the way of real models (the largest published dense and MoE models are ~2T).
#: Smallest count: below it ``arch_for_params``' embeddings alone exceed the total.
MIN_PARAMS = 100_000_000
MAX_PARAMS = 100_000_000_000_000
MIN_DERIVED_PARAMS = MIN_PARAMS  # the name arch_for_params' callers know
PARAMS_RANGE_TEXT = "between 100M and 100T parameters"

def arch_for_params(params: int) -> ModelArch:
    """A Llama-3-like shape for a bare parameter count (no model given), exactly ``params`` parameters.

    Fixed ratios so every dimension grows with the count (memory is then monotonic in it): hidden a
    multiple of 256, layers = hidden / 128, FFN 3.5 × hidden, 64-wide heads with 4 query heads per
    KV head (KV width = hidden / 4), vocab 128,256, untied. ``total_params`` pins the count: the
    decoder's parameters are scaled to make up the difference from the rounded shape.
    """
    if params < MIN_DERIVED_PARAMS:
        raise ValueError(f"params must be at least {MIN_DERIVED_PARAMS:.0e} to derive a transformer shape")
    vocab = 128_256
    hidden = 256
    while _shape_params(hidden + 256, vocab) <= params:
        hidden += 256
    heads = hidden // 64
    return ModelArch(id=f"params-{params}", name=f"{params / 1e9:.3g}B parameters (Llama-like shape)",
                     family="synthetic", layers=max(2, hidden // 128), hidden=hidden,
                     intermediate=7 * hidden // 2, heads=heads, kv_heads=heads // 4, head_dim=64,
                     vocab=vocab, total_params=params, source="derived from --params")


def check_param_bounds(arch: ModelArch, shown: str) -> None:
    """Refuse a config whose shape gives a parameter count outside the bounds ``--params`` has."""
    total = param_count(arch)
    if not MIN_PARAMS <= total <= MAX_PARAMS:
        raise FieldError("model_config", f"{{model_config}} {escape_braces(shown)}: its shape gives "
                         f"{total:.3g} parameters; a model must have {PARAMS_RANGE_TEXT} (the same "
                         "limits as {params}); check hidden_size, num_hidden_layers, "
                         "intermediate_size and vocab_size")
