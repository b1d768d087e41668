"""Per-GPU memory of a workload, whether it fits an accelerator, and what to change when it does not.

Modules, in the order a newcomer reads them:

* :mod:`.memory` — the peak memory per GPU as NVML shows it, split by component (the method, its
  sources and its measured error are in that module's docstring: median 1.0 %, max 4.7 % against
  23 H200 runs);
* :mod:`.activations` — the per-layer tensors kept for backward, attention masks, factored states;
* :mod:`.fit` — capacity, precision support, the fit verdict and the search for changes that fit;
* :mod:`.kv_pool` — KV-cache tokens and concurrent sequences of a serving engine (vLLM budgeting);
* :mod:`.overview` — :func:`~.overview.size_workload`: all of the above plus speed
  (:mod:`fleet_tui.core.perf`), imported from its module (planning does not use it).

Byte formulas shared with speed (weights, KV per token, LoRA parameters) live one level down in
:mod:`fleet_tui.core.footprint`; constants with physical meaning in :mod:`fleet_tui.core.calibration`.
Results are memoised in :mod:`fleet_tui.core.caches` (``caches.clear()`` empties them).
"""

from fleet_tui.core.footprint import kv_bytes_per_token, lora_params, parallel_split, weight_bytes
from fleet_tui.core.sizing.fit import (
                                       FitResult,
                                       FitSuggestion,
                                       capacity_bytes,
                                       check_fit,
                                       precision_support,
                                       suggest_fixes,
)
from fleet_tui.core.sizing.kv_pool import (
                                       EngineFit,
                                       KVCapacity,
                                       engine_fit,
                                       kv_capacity,
                                       running_workload,
                                       serves_with_engine,
                                       serving_sequence_tokens,
)
from fleet_tui.core.sizing.memory import COMPONENT_HELP, COMPONENT_ORDER, MemoryBreakdown, estimate_memory

__all__ = [
    "COMPONENT_HELP", "COMPONENT_ORDER", "EngineFit", "FitResult", "FitSuggestion", "KVCapacity", "MemoryBreakdown",
    "capacity_bytes", "check_fit", "engine_fit", "estimate_memory", "kv_bytes_per_token", "kv_capacity",
    "lora_params", "parallel_split", "precision_support", "running_workload", "serves_with_engine",
    "serving_sequence_tokens", "suggest_fixes", "weight_bytes",
]
