"""The PromQL fleet-tui sends: one instant query per refresh, one for slow-changing facts."""

from __future__ import annotations

from collections.abc import Iterable

from fleet_tui.core.monitor.sources.prometheus.metrics import (
    AGE_PROBES,
    DCGM_ID_LABELS,
    DYNAMIC_NAMES,
    PROBE_LABEL,
    STATIC_NAMES,
)


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



# -- a refresh in two steps: what changed, then only that ----------------------------------------
# At fleet scale most devices were not scraped again since the last refresh (dcgm-exporter
# collects every 30 s by default, Prometheus scrapes every 15-60 s, the UI refreshes every 2 s), so
# a refresh first asks for one sample time per device (the age probes, ~5% of the full answer) and
# then the moving metrics of the devices whose sample time moved: a 4,096-GPU fleet scraped every
# 15 s sends ~1/7 of the series per refresh (bench/bench_fleet.py).
def build_probe_query(names: Iterable[str] = DYNAMIC_NAMES) -> str:
    """Every device's sample time and ``up``, plus the (rarely large) non-DCGM series whole."""
    return build_query([n for n in names if not n.startswith("DCGM_")])


def build_changed_query(since: float, names: Iterable[str] = DYNAMIC_NAMES) -> str:
    """The moving DCGM metrics of the GPUs whose probe sample is newer than ``since`` (unix s)."""
    dcgm, _ = _split(names)
    by = ", ".join(DCGM_ID_LABELS)
    probe = next(p for p, vendor in AGE_PROBES.items() if vendor == "nvidia")
    sel = '{__name__=~"%s"}' % "|".join(dcgm)
    return (f"max by (__name__, {by}) ({sel}) and on ({by}) "
            f"(max by ({by}) (timestamp({probe})) > {since:.3f})")
