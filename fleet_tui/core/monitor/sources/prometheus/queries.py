"""The PromQL fleet-tui sends: one instant query per refresh, one for slow-changing facts."""

from __future__ import annotations

from collections.abc import Iterable

from fleet_tui.core.monitor.sources.prometheus.metrics import (AGE_PROBES, DCGM_ID_LABELS,
                                                              DYNAMIC_NAMES, PROBE_LABEL,
                                                              STATIC_NAMES)


def _split(names: Iterable[str]) -> tuple[list[str], list[str]]:
    names = list(names)
    return [n for n in names if n.startswith("DCGM_")], [n for n in names if not n.startswith("DCGM_")]


def build_query(names: Iterable[str] = DYNAMIC_NAMES, *, prune_labels: bool = True) -> str:
    """The per-refresh instant query: moving metrics, ``up``, and per-device sample times."""
    dcgm, other = _split(names)
    by = ", ".join(DCGM_ID_LABELS)
    parts = []
    if dcgm:
        sel = '{__name__=~"%s"}' % "|".join(dcgm)
        parts.append(f"max by (__name__, {by}) ({sel})" if prune_labels else sel)
    parts.append('{__name__=~"%s"}' % "|".join([*other, "up"]))
    for probe, vendor in AGE_PROBES.items():
        inner = f"timestamp({probe})"
        if prune_labels and probe.startswith("DCGM_"):
            inner = f"max by ({by}) ({inner})"
        parts.append(f'label_replace({inner}, "{PROBE_LABEL}", "{vendor}", "", "")')
    return " or ".join(parts)


def build_static_query(names: Iterable[str] = STATIC_NAMES) -> str:
    """Slow-changing facts plus each GPU's model name (kept on FB_USED, which every DCGM exports)."""
    dcgm, other = _split(names)
    by = ", ".join((*DCGM_ID_LABELS, "modelName", "GPU_I_PROFILE"))
    sel = '{__name__=~"%s"}' % "|".join([*dcgm, "DCGM_FI_DEV_FB_USED"])
    parts = [f"max by (__name__, {by}) ({sel})"]
    if other:
        parts.append('{__name__=~"%s"}' % "|".join(other))
    return " or ".join(parts)

