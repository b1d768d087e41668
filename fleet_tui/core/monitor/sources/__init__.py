"""Monitor sources and the one place that turns a ``--source`` string into a Source.

Forms (``open_source``):
  auto                   try nvml, then hpu, then neuron; otherwise a "no accelerator found" state
  nvml | hpu | neuron    that backend only (SourceUnavailable at open() if it cannot run here)
  sim[:N]                N deterministic simulated devices (1-64, default 2)
  replay:PATH[@SPEED]    play a recording (raw H200 capture or fleet-tui's format); PATH=demo is the
                         bundled H200 trace; SPEED is a factor (e.g. @10 or @10x)
  prometheus:URL         a fleet through a Prometheus server (DCGM-exporter metrics)

Backends are imported lazily, so importing this package costs nothing and ``--help`` stays fast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.source import Source, SourceUnavailable

__all__ = [
    "ALLOWED_FORMS",
    "SIM_MAX_DEVICES",
    "Source",
    "SourceSpec",
    "SourceUnavailable",
    "demo_trace_path",
    "open_source",
    "parse_source_spec",
]

SIM_MAX_DEVICES = 64
ALLOWED_FORMS = (
    "auto, nvml, hpu, neuron, sim, sim:N (N = 1-64), replay:PATH, replay:PATH@SPEED, replay:demo, "
    "prometheus:URL"
)
_PLAIN = ("auto", "nvml", "hpu", "neuron", "sim")


@dataclass(frozen=True, slots=True)
class SourceSpec:
    kind: str  # auto | nvml | hpu | neuron | sim | replay | prometheus
    devices: int | None = None  # sim
    path: str | None = None  # replay (as given; "demo" resolved by open_source)
    speed: float = 1.0  # replay
    url: str | None = None  # prometheus


def demo_trace_path() -> Path:
    return Path(__file__).resolve().parents[3] / "demo" / "h200_trace_labelled.jsonl"


def _bad(spec: str, why: str) -> UserError:
    return UserError(f"--source {spec!r}: {why}. Allowed: {ALLOWED_FORMS}.")


def parse_source_spec(spec: str) -> SourceSpec:
    """Parse a ``--source`` string; raises UserError naming the allowed forms."""
    text = (spec or "").strip()
    if not text:
        raise _bad(spec, "empty source")
    head, sep, rest = text.partition(":")
    kind = head.lower()
    if kind in ("auto", "nvml", "hpu", "neuron") and not sep:
        return SourceSpec(kind=kind)
    if kind == "sim":
        if not sep:
            return SourceSpec(kind="sim", devices=2)
        try:
            n = int(rest)
        except ValueError:
            raise _bad(spec, f"the device count {rest!r} is not a whole number") from None
        if not 1 <= n <= SIM_MAX_DEVICES:
            raise _bad(spec, f"the device count must be 1-{SIM_MAX_DEVICES}, got {n}")
        return SourceSpec(kind="sim", devices=n)
    if kind == "replay":
        if not rest:
            raise _bad(spec, "replay needs a file: replay:PATH (or replay:demo)")
        path, speed = rest, 1.0
        base, at, tail = rest.rpartition("@")
        if at and base:
            try:
                speed = float(tail.lower().removesuffix("x"))
            except ValueError:
                speed = None  # type: ignore[assignment]
            if speed is None or not math.isfinite(speed) or speed <= 0:
                raise _bad(spec, f"replay speed {tail!r} must be a positive number like @2 or @10x")
            path = base
        return SourceSpec(kind="replay", path=path, speed=speed)
    if kind == "prometheus":
        if not rest.startswith(("http://", "https://")):
            raise _bad(spec, "prometheus needs a URL starting with http:// or https://")
        return SourceSpec(kind="prometheus", url=rest)
    import difflib

    near = difflib.get_close_matches(kind, [*_PLAIN, "replay", "prometheus"], n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise _bad(spec, f"unknown source{hint}")


def open_source(spec: str, **opts) -> Source:
    """Build (not yet open) the Source for ``spec``. ``opts`` go to the backend's constructor
    (e.g. ``interval_s``, ``seed``, ``loop``, ``pcie_interval_s``). Call ``await src.open()``
    (or ``async with``) before ``sample()``."""
    parsed = parse_source_spec(spec)
    kind = parsed.kind
    if kind == "sim":
        from fleet_tui.core.monitor.sources.sim import SimSource

        return SimSource(n=parsed.devices or 2, **opts)
    if kind == "nvml":
        from fleet_tui.core.monitor.sources.nvml import NvmlSource

        return NvmlSource(**opts)
    if kind == "hpu":
        from fleet_tui.core.monitor.sources.hpu import HpuSource

        return HpuSource(**opts)
    if kind == "neuron":
        from fleet_tui.core.monitor.sources.neuron import NeuronSource

        return NeuronSource(**opts)
    if kind == "auto":
        from fleet_tui.core.monitor.sources.auto import AutoSource

        return AutoSource(**opts)
    if kind == "replay":
        from fleet_tui.core.monitor.sources.replay import ReplaySource

        assert parsed.path is not None
        path = demo_trace_path() if parsed.path == "demo" else Path(parsed.path).expanduser()
        if parsed.path != "demo" and not path.is_file():
            raise UserError(
                f"--source {spec!r}: recording {str(path)!r} does not exist or is not a file "
                "(use replay:demo for the bundled H200 trace)."
            )
        opts.setdefault("speed", parsed.speed)
        return ReplaySource("demo" if parsed.path == "demo" else path, **opts)
    if kind == "prometheus":
        try:
            from fleet_tui.core.monitor.sources.prometheus import PrometheusSource
        except ImportError as exc:  # H6's module not installed in this build
            raise SourceUnavailable(f"--source {spec!r}: the Prometheus source is not available ({exc}).") from exc
        return PrometheusSource(parsed.url, **opts)
    raise _bad(spec, "unknown source")  # pragma: no cover - parse_source_spec covers every kind
