"""What the analysis says: ``Diagnosis`` (one finding) and ``DeviceAnalysis`` (one device over one
window)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from math import floor, isfinite, log10
from typing import Any, NamedTuple

from fleet_tui.core.monitor.analysis.evidence import countdown, evidence_lines, gb_s
from fleet_tui.core.records import record

Evidence = tuple[tuple[str, float | str | None], ...]


def round3(x: float) -> float | None:
    """``x`` to 3 significant digits (None when not finite): how evidence numbers are shown."""
    if not isfinite(x):
        return None
    a = -x if x < 0 else x
    # the usual magnitudes by comparison, not a logarithm: every evidence number of every
    # diagnosis shown goes through here
    if a >= 100.0:
        return round(x, 0)
    if a >= 10.0:
        return round(x, 1)
    if a >= 1.0:
        return round(x, 2)
    if a == 0:
        return 0.0
    return round(x, 2 - floor(log10(a)))


@dataclass(frozen=True, eq=False, repr=False)
class Diagnosis:
    """One finding about one device. Immutable; compares, hashes, prints, copies and pickles by its
    seven values (a ``RuleDiagnosis`` equals the ``Diagnosis`` with the same values).

    ``role``: "bottleneck" (what limits the work now), "risk" (what will hurt later: growth,
    capacity, ECC/XID, heat) or "note" (worth knowing, limits nothing: a power cap at work,
    memory headroom)."""

    kind: str
    confidence: float  # 0-1
    evidence: Evidence  # signal -> value that triggered it
    explanation: str  # a sentence with the numbers
    action: str
    severity: str = "info"  # ok | info | warning | critical
    role: str = "bottleneck"  # bottleneck | risk | note

    def values(self) -> tuple[str, float, Evidence, str, str, str, str]:
        return (self.kind, self.confidence, self.evidence, self.explanation, self.action,
                self.severity, self.role)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Diagnosis):
            return NotImplemented
        return self is other or self.values() == other.values()

    def __hash__(self) -> int:
        return hash(self.values())

    def __repr__(self) -> str:
        return "Diagnosis(" + ", ".join(
            f"{name}={value!r}" for name, value in zip(_FIELDS, self.values())) + ")"

    def __reduce__(self) -> tuple[type, tuple]:
        return (Diagnosis, self.values())  # copies and pickles are plain diagnoses

    def evidence_value(self, signal: str, default: Any = None) -> Any:
        return self.evidence_dict.get(signal, default)

    @property
    def evidence_text(self) -> tuple[str, ...]:
        """The evidence for people: each value with its unit and scale (``evidence.FORMATS``)."""
        return evidence_lines(self.evidence_dict)

    @property
    def headline(self) -> str:
        """The kind in words with its modifier: "memory bandwidth bound, and power-capped"."""
        words = self.kind.replace("_", " ")
        if self.kind == "memory_growth" and self.severity == "critical":
            left, rate = self.evidence_value("time_to_full_s"), self.evidence_value("slope_bytes_s")
            if left is not None and rate is not None:
                return f"out of memory in {countdown(left)} at +{gb_s(rate)}"
        cap = self.evidence_value("capped_by")
        if cap == "power_capped":
            return words + ", and power-capped"
        if cap == "thermal_throttled":
            return words + ", and thermal-throttled"
        return words

    @property
    def evidence_dict(self) -> dict[str, Any]:
        return dict(self.evidence)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "confidence": round(self.confidence, 3),
                "evidence": self.evidence_dict, "evidence_text": list(self.evidence_text),
                "explanation": self.explanation,
                "action": self.action, "severity": self.severity, "role": self.role}


_FIELDS = ("kind", "confidence", "evidence", "explanation", "action", "severity", "role")


class Finding(NamedTuple):
    """What a rule found: its confidence, the raw evidence (signal -> value) and a function that
    writes the sentence. The registry adds the kind's action and severity."""

    confidence: float
    facts: dict[str, Any]
    describe: Callable[[], str]  # must only read values that do not change afterwards
    # a risk that cannot wait (memory full within minutes, at the slowdown temperature): it
    # outranks the bottleneck as ``primary``
    urgent: bool = False
    # this finding's severity where it is not the kind's (memory growth that will run out of
    # memory within a minute is critical; slower growth is the kind's warning)
    severity: str | None = None


class RuleDiagnosis(Diagnosis):
    """A diagnosis made by a rule: ``evidence`` (floats rounded to 3 significant digits) and
    ``explanation`` are built on first read.

    Why lazy: the engine diagnoses every device every tick, but only the ticks a pane draws, a CLI
    prints or an alert quotes need the text. Building it at once cost +4-5 us per device per tick
    in bench/bench_analysis.py's engine figures (fake-NVML snapshots 20.0 -> 25.1 us, sim:8 21.8 ->
    27.1 us, about +20 %), against a 10 % budget."""

    def __init__(self, kind: str, confidence: float, evidence: Evidence | None = None,
                 explanation: str | None = None, action: str = "", severity: str = "info",
                 finding: Finding | None = None, role: str = "bottleneck"):
        # the dataclass's own fields, set the way a frozen dataclass sets them
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "confidence", confidence)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "severity", severity)
        object.__setattr__(self, "role", role)
        object.__setattr__(self, "_finding", finding)
        if finding is None:  # given in full (dataclasses.replace)
            object.__setattr__(self, "evidence", evidence)
            object.__setattr__(self, "explanation", explanation)

    _finding: Finding | None  # None when given in full

    @property
    def finding(self) -> Finding | None:
        """What the rule found (None for a diagnosis given in full)."""
        return self._finding

    @property
    def evidence_text(self) -> tuple[str, ...]:
        """As ``Diagnosis.evidence_text``, from the raw (unrounded) facts."""
        if self._finding is None:
            return evidence_lines(self.evidence_dict)
        return evidence_lines(self._finding.facts)

    def _made(self) -> Finding:
        """The rule's finding: read only where evidence and text were not given in full."""
        finding = self._finding
        if finding is None:  # (__init__ set evidence and explanation: nothing is built)
            raise AttributeError("a diagnosis given in full has no finding")
        return finding

    @cached_property
    def evidence(self) -> Evidence:  # type: ignore[override]
        return tuple([(k, round3(v) if isinstance(v, float) else v)
                      for k, v in self._made().facts.items()])

    @cached_property
    def explanation(self) -> str:  # type: ignore[override]
        return self._made().describe()

    def evidence_value(self, signal: str, default: Any = None) -> Any:
        """One signal's shown value without building the rest of the evidence."""
        if "evidence" in self.__dict__:
            return self.evidence_dict.get(signal, default)
        facts = self._made().facts
        if signal not in facts:
            return default
        v = facts[signal]
        return round3(v) if isinstance(v, float) else v


@record
class DeviceAnalysis:
    """The diagnoses of one device over one window, most important first."""

    device_key: str
    device_index: int
    start: float
    end: float
    samples: int
    diagnoses: tuple[Diagnosis, ...]
    missing_signals: tuple[str, ...] = ()
    phase: str | None = None  # ground-truth label of the window (most samples), replays only

    @property
    def primary(self) -> str:
        """The bottleneck limiting the work now (the strongest evidence), or a risk that cannot
        wait."""
        return self.diagnoses[0].kind if self.diagnoses else "unknown"

    @property
    def risks(self) -> tuple[str, ...]:
        """The risks found besides ``primary`` (growth, capacity, ECC/XID, heat)."""
        return tuple(d.kind for d in self.diagnoses[1:] if d.role == "risk")

    @property
    def primary_diagnosis(self) -> Diagnosis | None:
        return self.diagnoses[0] if self.diagnoses else None

    def kinds(self) -> tuple[str, ...]:
        return tuple(d.kind for d in self.diagnoses)

    def get(self, kind: str) -> Diagnosis | None:
        return next((d for d in self.diagnoses if d.kind == kind), None)

    def to_dict(self) -> dict[str, Any]:
        return {"start": round(self.start, 3), "end": round(self.end, 3), "phase": self.phase,
                "device": self.device_index, "device_key": self.device_key,
                "primary": self.primary, "risks": list(self.risks), "samples": self.samples,
                "missing_signals": list(self.missing_signals),
                "diagnoses": [d.to_dict() for d in self.diagnoses]}
