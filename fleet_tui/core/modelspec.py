"""Model architectures: the published shape of a transformer, from models.toml or a config.json.

Owned by the sizing code; the catalog loader validates ``catalogs/models.toml`` entries with
``ModelArch``. Parameter counts are derived from the shape (``param_count``), never typed in.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator


class ModelArch(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
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
    experts: int = Field(default=0, ge=0)
    experts_per_token: int = Field(default=0, ge=0)
    moe_intermediate: PositiveInt | None = None  # expert FFN width when it differs from intermediate
    shared_experts: int = Field(default=0, ge=0)
    max_position: PositiveInt | None = None
    source: str = ""

    @model_validator(mode="after")
    def _check(self) -> "ModelArch":
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.experts and not (0 < self.experts_per_token <= self.experts):
            raise ValueError("experts_per_token must be between 1 and experts for a MoE model")
        return self

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 0
