"""Named scenarios (``catalogs/workloads.toml``): a workload, the setup it runs on today, and sets.

A scenario is the old GPU migration analyzer's unit: "this model, this shape, on this many of this
instance". :func:`run_scenario` sizes it on its current setup, ranks every catalog offer for it
(:func:`fleet_tui.core.ranking.recommend`) and reports the migration to the best one (savings,
performance change, memory check, risk, complexity). :func:`run_set` does that for a named set.

Files: the bundled ``workloads.toml``, then ``workloads.toml`` in the user's catalog directory and
in each extra catalog directory; a later scenario or set with the same id replaces the earlier one.
Problems are reported as ``file:line: field: message``: in the bundled file they raise
:class:`~fleet_tui.core.errors.CatalogError`; a broken user file is reported in
``Scenarios.problems`` and skipped whole, and the rest loads.

JSON (``ScenarioResult.to_dict()``)::

    {"scenario": {"id", "title", "description", "tags", "current_instance", "current_count",
                  "current_region", "pricing", "consider_pricing", "hours_per_month", "schedule",
                  "training_tokens"},
     "recommendation": <Recommendation.to_dict()>, "migration": <MigrationReport.to_dict()> | null,
     "explain": [str]}

``SetResult.to_dict()``: ``{"set": {"id", "title", "description", "scenarios"}, "results": [...],
"summary": {"scenarios", "current_usd_per_month", "best_usd_per_month",
"savings_usd_per_month", "savings_pct", "not_fitting_current": [ids], "no_alternative": [ids]}}``
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

from fleet_tui.core import paths
from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.errors import CatalogError, UserError
from fleet_tui.core.pricing import PRICING_OPTIONS, Schedule
from fleet_tui.core.ranking import recommend
from fleet_tui.core.ranking.explanation import explain
from fleet_tui.core.ranking.migration import report_between
from fleet_tui.core.records import record, validate
from fleet_tui.core.tomlio import TomlDoc, problem, read_toml, validate_table
from fleet_tui.core.workload import MasterWeights, Optimizer, Serving, Sharding, WeightPrecision, Workload, WorkloadKind

WORKLOADS_FILE = "workloads.toml"
_TOP_KEYS = ("scenario", "set", "meta")


class ScenarioSpec(BaseModel):
    """One ``[[scenario]]`` entry as written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    title: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    # the workload (same names as Workload / `fleet-tui size` flags)
    kind: WorkloadKind
    model: str = Field(min_length=1)
    precision: WeightPrecision = "bf16"
    batch: PositiveInt = 1
    seq_len: PositiveInt | None = None
    prompt_len: PositiveInt | None = None
    gen_len: PositiveInt | None = None
    optimizer: Optimizer = "adamw"
    master_weights: MasterWeights = "fp32"
    grad_checkpointing: bool = False
    lora_rank: PositiveInt = 16
    lora_targets: tuple[str, ...] | None = None
    sharding: Sharding | None = None
    serving: Serving = "interactive"
    # the current setup and how it is paid for
    current_instance: str = Field(min_length=1)
    current_count: PositiveInt = 1
    current_region: str | None = None
    pricing: Literal["on-demand", "spot", "reserved-1y", "reserved-3y"] = "on-demand"
    consider_pricing: Literal["on-demand", "spot", "reserved-1y", "reserved-3y", "any"] | None = None
    hours_per_month: PositiveFloat | None = None
    schedule: str | None = None
    training_tokens: PositiveFloat | None = None


class ScenarioSetSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    title: str = ""
    description: str = ""
    scenarios: tuple[str, ...] = Field(min_length=1)


@record
class Scenarios:
    scenarios: dict[str, ScenarioSpec]  # id -> spec, file order
    sets: dict[str, ScenarioSetSpec]
    origin: dict[str, str]  # id -> "file:line" where it was defined
    problems: tuple[str, ...] = ()  # from user files that were skipped

    def scenario(self, ident: str) -> ScenarioSpec:
        spec = self.scenarios.get(ident)
        if spec is None:
            raise UserError(_unknown("scenario", ident, list(self.scenarios))
                            + " (see `fleet-tui scenarios list`)")
        return spec

    def set(self, name: str) -> ScenarioSetSpec:
        spec = self.sets.get(name)
        if spec is None:
            raise UserError(_unknown("scenario set", name, list(self.sets)))
        return spec


def _unknown(kind: str, name: str, known: Sequence[str]) -> str:
    import difflib

    near = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    msg = f"unknown {kind} '{name}'"
    if near:
        msg += f"; did you mean {', '.join(near)}?"
    return msg + f" (known: {', '.join(sorted(known))})"


# ------------------------------------------------------------------------------------------------
# Loading


def _read_file(path: Path, catalog) -> tuple[list[ScenarioSpec], list[ScenarioSetSpec],
                                             dict[str, str], list[str], TomlDoc | None]:
    doc, problems = read_toml(path)
    if doc is None:
        return [], [], {}, problems, None
    for key in doc.data:
        if key not in _TOP_KEYS:
            problems.append(problem(path, doc.line_of(None, key=key) or doc.line_of(key), key,
                                    "unknown table or key (allowed: [[scenario]], [[set]], [meta])"))
    meta = doc.data.get("meta", {})
    if not isinstance(meta, dict):
        problems.append(problem(path, doc.line_of(None, key="meta"), "meta", "must be a table"))
    scenarios: list[ScenarioSpec] = []
    sets: list[ScenarioSetSpec] = []
    origin: dict[str, str] = {}
    for table, model, sink in (("scenario", ScenarioSpec, scenarios), ("set", ScenarioSetSpec, sets)):
        entries, probs = validate_table(doc, table, model)
        problems.extend(probs)
        for i, spec in entries:
            origin[f"{table}:{spec.id}"] = f"{path}:{doc.line_of(table, i)}"
            sink.append(spec)
            if table == "scenario":
                problems.extend(_check_scenario(doc, i, spec, catalog))
    return scenarios, sets, origin, problems, doc


def _check_scenario(doc: TomlDoc, i: int, spec: ScenarioSpec, catalog) -> list[str]:
    """References and combinations pydantic cannot see."""
    out: list[str] = []

    def err(key: str, msg: str) -> None:
        out.append(problem(doc.path, doc.line_of("scenario", i, key), f"scenario[{i}].{key}", msg))

    if catalog is not None:
        try:
            catalog.model(spec.model)
        except UserError as exc:
            err("model", str(exc))
        try:
            rows = catalog.find_instance(spec.current_instance)
        except UserError as exc:
            err("current_instance", str(exc))
            rows = []
        if rows and spec.current_region:
            regions = {r.region.lower() for r in rows}
            if spec.current_region.lower() not in regions:
                err("current_region", f"{spec.current_instance} is not offered in "
                    f"'{spec.current_region}' (offered in: {', '.join(sorted({r.region for r in rows}))})")
    if spec.hours_per_month is not None and spec.schedule is not None:
        err("schedule", "give hours_per_month or schedule, not both")
    try:
        _scenario_schedule(spec)
    except UserError as exc:
        err("schedule" if spec.schedule else "hours_per_month", str(exc))
    if spec.kind == "inference":
        if spec.training_tokens is not None:
            err("training_tokens", "only training scenarios have training tokens")
        if spec.gen_len is None and spec.seq_len is None:
            err("gen_len", "inference needs prompt_len + gen_len (generation) or seq_len (forward pass)")
        if spec.gen_len is not None and spec.prompt_len is None:
            err("prompt_len", "generation needs prompt_len with gen_len")
    else:
        if spec.seq_len is None:
            err("seq_len", "training scenarios need seq_len (tokens per sequence)")
        if spec.gen_len is not None or spec.prompt_len is not None:
            err("gen_len", "prompt_len/gen_len are for inference; training uses seq_len")
    return out


def _check_sets(sets: list[ScenarioSetSpec], known: set[str],
                doc: TomlDoc | None) -> list[str]:
    out = []
    for i, s in enumerate(sets):
        for name in s.scenarios:
            if name not in known:
                line = doc.line_of("set", i, "scenarios") if doc is not None else None
                out.append(problem(doc.path if doc else "?", line, f"set[{i}].scenarios",
                                   _unknown("scenario", name, sorted(known))))
    return out


def workloads_files(extra_dirs: Sequence[Path | str] = (), include_user: bool = True) -> list[Path]:
    dirs = [paths.bundled_catalog_dir()]
    if include_user:
        dirs.append(paths.user_catalog_dir())
    dirs.extend(Path(d).expanduser() for d in extra_dirs)
    return [d / WORKLOADS_FILE for d in dirs if (d / WORKLOADS_FILE).is_file()]


def load_scenarios(catalog=None, *, files: Sequence[Path | str] | None = None,
                   extra_dirs: Sequence[Path | str] = (), include_user: bool = True) -> Scenarios:
    """Scenarios and sets from ``files`` (default: bundled, user, extra dirs), checked.

    The first file is authoritative (its problems raise ``CatalogError``); later files that have
    problems are skipped whole and their problems kept in ``Scenarios.problems``. ``catalog``
    (default: the loaded catalog) is used to check model and instance names.
    """
    if catalog is None:
        catalog = load_catalog(extra_dirs, include_user)
    paths_ = [Path(f) for f in files] if files is not None else workloads_files(extra_dirs, include_user)
    scenarios: dict[str, ScenarioSpec] = {}
    sets: dict[str, ScenarioSetSpec] = {}
    origin: dict[str, str] = {}
    skipped: list[str] = []
    for n, path in enumerate(paths_):
        sc, st, org, problems, doc = _read_file(path, catalog)
        if not problems:
            known = set(scenarios) | {s.id for s in sc}
            problems = _check_sets(st, known, doc)
        if problems:
            if n == 0:
                raise CatalogError(problems)
            skipped.extend(problems)
            skipped.append(f"{path}: skipped because of the problems above")
            continue
        for s in sc:
            scenarios[s.id] = s
        for s in st:
            sets[s.id] = s
        origin.update(org)
    return Scenarios(scenarios=scenarios, sets=sets, origin=origin, problems=tuple(skipped))


def validate_file(path: Path | str, catalog=None) -> list[str]:
    """Every problem in one workloads file (empty list when it is good)."""
    if catalog is None:
        catalog = load_catalog()
    path = Path(path)
    sc, st, org, problems, doc = _read_file(path, catalog)
    if not problems:
        bundled = {}
        if path.resolve() != (paths.bundled_catalog_dir() / WORKLOADS_FILE).resolve():
            try:
                bundled = load_scenarios(catalog, include_user=False).scenarios
            except CatalogError:
                bundled = {}
        problems = _check_sets(st, set(bundled) | {s.id for s in sc}, doc)
    return problems


# ------------------------------------------------------------------------------------------------
# From a spec to a workload


def _scenario_schedule(spec: ScenarioSpec) -> Schedule:
    if spec.schedule is not None:
        return Schedule.parse(spec.schedule)
    if spec.hours_per_month is not None:
        return Schedule(spec.hours_per_month)
    return Schedule.always_on()


def build_workload(spec: ScenarioSpec, catalog):
    """The :class:`~fleet_tui.core.workload.Workload` a scenario describes, on its current setup."""
    rows = catalog.find_instance(spec.current_instance)
    devices = max(int(round(rows[0].accelerator_count)), 1) * spec.current_count
    sharding = spec.sharding
    if sharding is None:
        sharding = "data" if devices == 1 else ("tensor" if spec.kind == "inference" else "fsdp")
    fields: dict[str, Any] = dict(
        kind=spec.kind, model=catalog.model(spec.model), precision=spec.precision, batch=spec.batch,
        seq_len=spec.seq_len, prompt_len=spec.prompt_len, gen_len=spec.gen_len,
        optimizer=spec.optimizer, master_weights=spec.master_weights,
        grad_checkpointing=spec.grad_checkpointing, lora_rank=spec.lora_rank, gpus=devices,
        sharding=sharding, serving=spec.serving,
    )
    if spec.lora_targets is not None:
        fields["lora_targets"] = spec.lora_targets
    try:
        return validate(Workload, fields)
    except ValidationError as exc:
        raise UserError(f"scenario {spec.id}: {exc.errors()[0].get('msg', exc)}") from None


# ------------------------------------------------------------------------------------------------
# Running


@record
class ScenarioResult:
    spec: ScenarioSpec
    workload: Any
    recommendation: Any  # Recommendation
    migration: Any  # MigrationReport to the best offer, or None when nothing fits
    explanation: tuple[str, ...]

    @property
    def current(self):
        return self.recommendation.current

    @property
    def best(self):
        return self.recommendation.best

    def to_dict(self) -> dict[str, Any]:
        s = self.spec
        return {
            "scenario": {
                "id": s.id, "title": s.title, "description": s.description, "tags": list(s.tags),
                "current_instance": s.current_instance, "current_count": s.current_count,
                "current_region": s.current_region, "pricing": s.pricing,
                "consider_pricing": s.consider_pricing or s.pricing,
                "hours_per_month": _scenario_schedule(s).hours_per_month,
                "schedule": _scenario_schedule(s).label, "training_tokens": s.training_tokens,
            },
            "recommendation": self.recommendation.to_dict(),
            "migration": self.migration.to_dict() if self.migration is not None else None,
            "explain": list(self.explanation),
        }


@record
class SetResult:
    spec: ScenarioSetSpec
    results: tuple[ScenarioResult, ...]

    def summary(self) -> dict[str, Any]:
        cur_total = best_total = 0.0
        not_fitting, no_alt = [], []
        for r in self.results:
            cur, best = r.current, r.best
            if cur is None or not cur.fits:
                not_fitting.append(r.spec.id)
            if best is None:
                no_alt.append(r.spec.id)
            if cur is not None and best is not None and cur.fits \
                    and r.migration is not None and r.migration.savings_usd_per_month is not None:
                cur_total += cur.usd_per_month
                best_total += cur.usd_per_month - r.migration.savings_usd_per_month
        savings = cur_total - best_total
        return {
            "scenarios": len(self.results),
            "current_usd_per_month": round(cur_total, 2),
            "best_usd_per_month": round(best_total, 2),
            "savings_usd_per_month": round(savings, 2),
            "savings_pct": round(100.0 * savings / cur_total, 2) if cur_total else None,
            "not_fitting_current": not_fitting,
            "no_alternative": no_alt,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "set": {"id": self.spec.id, "title": self.spec.title,
                    "description": self.spec.description, "scenarios": list(self.spec.scenarios)},
            "results": [r.to_dict() for r in self.results],
            "summary": self.summary(),
        }


def run_spec(spec: ScenarioSpec, catalog, *, top: int = 5) -> ScenarioResult:
    workload = build_workload(spec, catalog)
    consider = spec.consider_pricing or spec.pricing
    rec = recommend(
        workload, catalog, current=(spec.current_instance, spec.current_count),
        current_region=spec.current_region, current_pricing=spec.pricing, pricing=consider,
        hours_per_month=_scenario_schedule(spec), training_tokens=spec.training_tokens, top=top,
    )
    migration = None
    if rec.current is not None and rec.best is not None:
        migration = report_between(rec.current, rec.best, notes=rec.notes)
    return ScenarioResult(spec=spec, workload=workload, recommendation=rec, migration=migration,
                          explanation=tuple(explain(rec)))


def run_scenario(ident: str, catalog=None, *, top: int = 5,
                 scenarios: Scenarios | None = None) -> ScenarioResult:
    """Size, rank and report one named scenario (see module docstring)."""
    if catalog is None:
        catalog = load_catalog()
    scenarios = scenarios or load_scenarios(catalog)
    return run_spec(scenarios.scenario(ident), catalog, top=top)


def run_set(name: str, catalog=None, *, top: int = 5,
            scenarios: Scenarios | None = None) -> SetResult:
    """Run every scenario of the named set."""
    if catalog is None:
        catalog = load_catalog()
    scenarios = scenarios or load_scenarios(catalog)
    spec = scenarios.set(name)
    results = tuple(run_spec(scenarios.scenario(i), catalog, top=top) for i in spec.scenarios)
    return SetResult(spec=spec, results=results)


__all__ = [
    "PRICING_OPTIONS", "ScenarioResult", "ScenarioSetSpec", "ScenarioSpec", "Scenarios",
    "SetResult", "build_workload", "load_scenarios", "run_scenario", "run_set", "run_spec",
    "validate_file",
]
