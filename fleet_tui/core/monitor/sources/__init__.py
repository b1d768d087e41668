"""Monitor sources: the registry of every ``--source`` and the one place that turns a spec string
into a Source.

``SOURCES`` holds one ``SourceInfo`` per source. Everything that lists sources reads it: the
``--source`` help (``source_help``), the forms named in errors (``allowed_forms``), ``auto``'s probe
order (``probe_order``), the app's help and palette. Adding a source is one module under
``sources/`` plus one line in ``SOURCES``.

Backends are imported only when opened (``SourceInfo.opener`` is an import path), so importing this
package costs nothing and ``--help`` stays fast.
"""

from __future__ import annotations

import difflib
import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.source import Source, SourceUnavailable
from fleet_tui.core.records import record
from fleet_tui.core.redact import redact, redact_spec

__all__ = [
    "SIM_MAX_DEVICES",
    "SOURCES",
    "Source",
    "SourceInfo",
    "SourceSpec",
    "SourceUnavailable",
    "allowed_forms",
    "load_opener",
    "open_source",
    "parse_source_spec",
    "probe_order",
    "source_help",
]

SIM_MAX_DEVICES = 64

#: Turns the text after ``name:`` (None when there is no colon) into keyword arguments for the
#: opener; raises ValueError with the reason the text is wrong.
ArgParser = Callable[[str | None], dict[str, Any]]


@record
class SourceInfo:
    """One ``--source``: how it is written, what it reads, and where its code lives."""

    name: str  # the word before ':' in the spec
    usage: str  # short form for --help, e.g. "sim[:N]"
    forms: str  # every form, for error messages, e.g. "sim, sim:N (N = 1-64)"
    help: str  # one line: what it reads
    opener: str  # "module:callable" -> an unopened Source; imported only when used
    arg: ArgParser | None = None  # None: the source takes no ":..." argument
    probe: int | None = None  # auto tries sources with a number, lowest first (and checks them at start)
    probe_opener: str | None = None  # what auto calls instead of ``opener`` (None: the opener)


@record
class SourceSpec:
    """A parsed ``--source``: the registry name and the keyword arguments its opener receives."""

    kind: str
    args: Mapping[str, Any] = field(default_factory=dict)


# ----- argument shapes --------------------------------------------------------------------------

def _sim_arg(rest: str | None) -> dict[str, Any]:
    if rest is None:
        return {"n": 2}
    try:
        n = int(rest)
    except ValueError:
        raise ValueError(f"the device count {rest!r} is not a whole number") from None
    if not 1 <= n <= SIM_MAX_DEVICES:
        raise ValueError(f"the device count must be 1-{SIM_MAX_DEVICES}, got {n}")
    return {"n": n}


def _replay_arg(rest: str | None) -> dict[str, Any]:
    if not rest:
        raise ValueError("replay needs a file: replay:PATH (or replay:demo)")
    path, speed = rest, 1.0
    base, at, tail = rest.rpartition("@")
    if at and base:
        try:
            speed = float(tail.lower().removesuffix("x"))
        except ValueError:
            speed = math.nan
        if not math.isfinite(speed) or speed <= 0:
            raise ValueError(f"replay speed {tail!r} must be a positive number like @2 or @10x")
        path = base
    return {"path": path, "speed": speed}


def url_arg(rest: str | None) -> dict[str, Any]:
    """``name:URL`` for sources read over HTTP(S)."""
    if not (rest or "").startswith(("http://", "https://")):
        raise ValueError("needs a URL starting with http:// or https://")
    return {"url": rest}


def _prometheus_arg(rest: str | None) -> dict[str, Any]:
    try:
        return url_arg(rest)
    except ValueError as exc:
        raise ValueError(f"prometheus {exc}") from None


def _fleet_replay_arg(rest: str | None) -> dict[str, Any]:
    if not rest:
        return {"path": "demo"}
    parsed = _replay_arg(rest)
    return parsed


# ----- the registry -----------------------------------------------------------------------------

_HERE = "fleet_tui.core.monitor.sources"

SOURCES: dict[str, SourceInfo] = {info.name: info for info in (
    SourceInfo("auto", "auto (default)", "auto", "the first local backend that works, in probe order",
               f"{_HERE}.auto:AutoSource"),
    SourceInfo("nvml", "nvml", "nvml", "NVIDIA GPUs through NVML", f"{_HERE}.nvml:NvmlSource", probe=1),
    SourceInfo("hpu", "hpu", "hpu", "Intel Gaudi through hl-smi / pyhlml", f"{_HERE}.hpu:HpuSource", probe=2),
    SourceInfo("neuron", "neuron", "neuron", "AWS Trainium/Inferentia through neuron-monitor",
               f"{_HERE}.neuron:NeuronSource", probe=3, probe_opener=f"{_HERE}.neuron:probing_source"),
    SourceInfo("amd", "amd", "amd", "AMD GPUs through AMD SMI (amdsmi library, else amd-smi)",
               f"{_HERE}.amd:AmdSource", probe=4),
    SourceInfo("sim", "sim[:N]", f"sim, sim:N (N = 1-{SIM_MAX_DEVICES})",
               f"N deterministic simulated devices (1-{SIM_MAX_DEVICES}, default 2)",
               f"{_HERE}.sim:SimSource", arg=_sim_arg),
    SourceInfo("replay", "replay:PATH", "replay:PATH, replay:PATH@SPEED, replay:demo",
               "play a recording at SPEED (e.g. @10x); replay:demo is the bundled H200 trace",
               f"{_HERE}.replay:open_recording", arg=_replay_arg),
    SourceInfo("fleet-replay", "fleet-replay:demo", "fleet-replay:demo, fleet-replay:PATH[@SPEED]",
               "REPLAY of a recorded fleet: 32 nodes × 8 H200 with jobs (dcgm-exporter labels)",
               f"{_HERE}.fleet_replay:open_fleet_recording", arg=_fleet_replay_arg),
    SourceInfo("prometheus", "prometheus:URL", "prometheus:URL",
               "a fleet through a Prometheus server (DCGM-exporter metrics)",
               f"{_HERE}.prometheus:PrometheusSource", arg=_prometheus_arg),
)}


def source_help() -> str:
    """The ``--source`` flag's help: every source's short form."""
    return "where live readings come from: " + ", ".join(info.usage for info in SOURCES.values())


def allowed_forms() -> str:
    """Every accepted form, for error messages."""
    return ", ".join(info.forms for info in SOURCES.values())


def probe_order() -> list[SourceInfo]:
    """The sources ``auto`` tries, in order."""
    return sorted((i for i in SOURCES.values() if i.probe is not None), key=lambda i: i.probe or 0)


def load_opener(path: str) -> Callable[..., Source]:
    """``"module:attribute"`` -> the attribute (imported now)."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _bad(spec: str, why: str) -> UserError:
    return UserError(f"--source {redact_spec(spec)!r}: {redact(why)}. Allowed: {allowed_forms()}.")


def parse_source_spec(spec: str) -> SourceSpec:
    """Parse a ``--source`` string; raises UserError naming the allowed forms."""
    text = (spec or "").strip()
    if not text:
        raise _bad(spec, "empty source")
    head, sep, rest = text.partition(":")
    info = SOURCES.get(head.lower())
    if info is not None and (info.arg is not None or not sep):
        try:
            args = info.arg(rest if sep else None) if info.arg is not None else {}
        except ValueError as exc:
            raise _bad(spec, str(exc)) from None
        return SourceSpec(info.name, args)
    near = difflib.get_close_matches(head.lower(), list(SOURCES), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise _bad(spec, f"unknown source{hint}")


def open_source(spec: str, **opts: Any) -> Source:
    """Build (not yet open) the Source for ``spec``. ``opts`` go to the backend's constructor
    (e.g. ``interval_s``, ``seed``, ``loop``, ``pcie_interval_s``); a backend ignores the ones it
    does not take. Call ``await src.open()`` (or ``async with``) before ``sample()``."""
    parsed = parse_source_spec(spec)
    opener = load_opener(SOURCES[parsed.kind].opener)
    try:
        return opener(**{**parsed.args, **opts})
    except UserError as exc:
        if str(exc).startswith("--source"):
            raise
        wrap = SourceUnavailable if isinstance(exc, SourceUnavailable) else UserError
        raise wrap(redact(f"--source {redact_spec(spec)!r}: {exc}")) from None
