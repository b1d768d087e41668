"""The one answer to "does it fit, how fast, what does it cost": :class:`PlanReport` and its JSON.

Every front end renders this record: ``fleet-tui size`` prints :meth:`PlanReport.to_dict` (its
``--json``) or a text view of it, the Workload builder lays the same record out as markup, and the
ranking's top offer is planned into one. Sentences that name an input hold ``{field}`` placeholders
(argparse dests); :meth:`PlanReport.to_dict` takes the front end's ``label`` for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fleet_tui.core.errors import render_fields
from fleet_tui.core.modelspec import param_counts

if TYPE_CHECKING:  # the capacity plan and the catalog are imported only when a plan asks for them
    from fleet_tui.core.catalog.setup_cost import SetupCost
    from fleet_tui.core.perf.run import RunEstimate
    from fleet_tui.core.perf.serving_plan import ServingPlan
    from fleet_tui.core.perf.sim_plan import BurstReport
    from fleet_tui.core.perf.throughput import Throughput
    from fleet_tui.core.sizing.fit import FitSuggestion
    from fleet_tui.core.sizing.kv_pool import EngineFit, KVCapacity
    from fleet_tui.core.sizing.memory import MemoryBreakdown
    from fleet_tui.core.workload import Workload

#: The verdict, in one closed set: ``fits``/``does_not_fit`` for training and Hugging Face runs,
#: ``starts``/``does_not_start`` for a serving engine, ``unchecked`` without an accelerator.
VerdictStatus = Literal["fits", "does_not_fit", "starts", "does_not_start", "unchecked"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the workload fits (or its engine starts) on the target, and by how much."""

    status: VerdictStatus
    message: str  # one sentence: "uses 17.6 of 79.2 GiB per GPU (61.6 GiB free)"
    capacity_bytes: int | None = None
    headroom_bytes: int | None = None
    precision_supported: bool | None = None
    precision_note: str = ""
    engine_error: str = ""  # a serving engine that does not start: its own error message
    running: int | None = None  # a serving engine that starts: sequences it runs at once
    queued: int | None = None  # the batch's other requests, waiting
    running_limit: str = ""  # what sets ``running``: "kv cache", "max_num_seqs", "batch"

    @property
    def ok(self) -> bool | None:
        """True when it fits or starts, False when not, None when unchecked."""
        return None if self.status == "unchecked" else self.status in ("fits", "starts")

    @property
    def headline(self) -> str:
        return {"fits": "FITS", "does_not_fit": "DOES NOT FIT", "starts": "STARTS",
                "does_not_start": "DOES NOT START", "unchecked": "NOT CHECKED"}[self.status]


@dataclass(frozen=True, slots=True)
class PlanReport:
    """Everything about one workload on one target (see the module docstring)."""

    workload: Workload  # as placed: its layout set when the layout was searched
    accelerator: str | None  # the target device (None: no device asked for)
    gpus: int
    layout: str | None  # "TP4", "TP2 × DP2", None on one device
    verdict: Verdict
    memory: MemoryBreakdown  # per GPU; a serving engine's: the least it starts on
    engine: EngineFit | None  # a serving engine on the target: its reserve, pool and queue
    kv_capacity: KVCapacity | None
    fixes: tuple[FitSuggestion, ...]  # changes that make it fit or start, cheapest first, each once
    speed: Throughput | None  # None when it does not fit
    speed_accelerator: str | None  # the device the speed is for (the reference one without a target)
    training_run: RunEstimate | None
    serving_plan: ServingPlan | None
    plan_price_source: str | None
    burst: BurstReport | None
    burst_replicas: int
    burst_requests: int | None  # the burst asked for (its speed in ``burst``, None when unknown)
    cost: SetupCost | None
    assumptions: tuple[str, ...]  # ``{field}`` templates
    notes: tuple[str, ...] = ()  # about the target itself ("no --gpu given: speed shown for H100")
    offer: str | None = None  # with the catalog as target: the top-ranked offer planned here
    links: str | None = None  # the links the speed was charged on, and where they come from (perf.fabric)

    def assumption_lines(self, label: Callable[[str], str]) -> list[str]:
        return list(dict.fromkeys(render_fields(a, label) for a in self.assumptions))

    def to_dict(self, label: Callable[[str], str]) -> dict[str, Any]:
        """The ``size --json`` document (keys in the ``commands.size`` docstring)."""
        return _report_json(self, label)


def _workload_json(r: PlanReport) -> dict[str, Any]:
    w = r.workload
    arch = w.arch
    pc = param_counts(arch)
    wd: dict[str, Any] = {
        "model": arch.id, "model_name": arch.name or arch.id, "params": pc.total,
        "active_params": pc.active, "kind": w.kind, "precision": w.precision, "batch": w.batch,
        "seq_len": w.seq_len, "target_len": w.target_len, "prompt_len": w.prompt_len, "gen_len": w.gen_len,
        "gpus": w.gpus, "sharding": w.sharding, "layout": r.layout,
    }
    if w.is_training:
        wd.update(optimizer=w.optimizer, master_weights=w.master_weights,
                  grad_checkpointing=w.grad_checkpointing, framework=w.framework, chunked_loss=w.chunked_loss,
                  optimizer_in_backward=w.optimizer_in_backward, offload=list(w.offload), compile=w.compile,
                  selective_checkpointing=w.selective_checkpointing)
    else:
        cfg = w.engine_config
        wd.update(engine=cfg.engine, kv_cache_dtype=cfg.kv_cache_dtype,
                  gpu_memory_utilization=cfg.gpu_memory_utilization,
                  max_num_batched_tokens=cfg.max_num_batched_tokens)
        if cfg.api_server_count:
            wd["api_server_count"] = cfg.api_server_count
    if w.is_adapter:
        wd.update(lora_rank=w.lora_rank, lora_targets=list(w.lora_targets))
    return wd


def _report_json(r: PlanReport, label: Callable[[str], str]) -> dict[str, Any]:
    mem = r.memory
    v = r.verdict
    checked = v.status != "unchecked"
    out: dict[str, Any] = {
        "workload": _workload_json(r),
        "memory": {"total_bytes": mem.total_bytes, "total_gib": round(mem.total_gib, 3), "per_gpu": mem.per_gpu,
                   "phase": mem.phase, "breakdown": dict(mem.breakdown), "assumptions": mem.notes(label)},
        "accelerator": r.accelerator,
        "gpus": r.gpus,
        "verdict": {"status": v.status, "ok": v.ok, "message": v.message, "engine_error": v.engine_error or None,
                    "running": v.running, "queued": v.queued, "running_limit": v.running_limit or None},
        "fits": v.ok if checked else None,
        "capacity_bytes": v.capacity_bytes,
        "headroom_bytes": v.headroom_bytes,
        "precision_supported": v.precision_supported,
        "precision_note": (v.precision_note or None) if checked else None,
        "fit_message": v.message if checked else None,
        "suggestions": [{"description": s.render(label), "change": s.change, "total_bytes": s.total_bytes,
                         "gpus": s.gpus} for s in r.fixes],
        "engine": None, "kv_capacity": None, "throughput": None, "training_run": None,
        "serving_plan": None, "burst": None, "cost": None, "offer": r.offer,
    }
    e = r.engine
    if e is not None:
        out["engine"] = {"engine": e.engine, "starts": e.starts, "reserved_bytes": e.reserved_bytes,
                         "parts": dict(e.parts), "kv_tokens": e.kv_tokens, "sequence_tokens": e.sequence_tokens,
                         "running": e.running, "queued": e.queued, "limit": e.limit or None,
                         "error": e.error or None, "replicas": e.replicas}
    kv = r.kv_capacity
    if kv is not None:
        out["kv_capacity"] = {"tokens": kv.tokens, "concurrent_sequences": kv.concurrent_sequences,
                              "bytes_per_token": kv.bytes_per_token, "sequence_tokens": kv.sequence_tokens}
    thr = r.speed
    if thr is not None:
        out["throughput"] = {
            "tokens_per_s": thr.tokens_per_s, "phase": thr.phase,
            "prefill_tokens_per_s": thr.prefill_tokens_per_s, "decode_tokens_per_s": thr.decode_tokens_per_s,
            "time_per_output_token_s": thr.time_per_output_token_s,
            "time_to_first_token_s": thr.time_to_first_token_s, "step_s": thr.step_s, "mfu": thr.mfu,
            "engine": thr.engine, "bound": thr.bound, "accelerator": r.speed_accelerator,
            "assumptions": [n.format(gpu=label("gpu")) if "{gpu}" in n else n for n in r.notes]
            + list(thr.assumptions),
            "unknown": thr.unknown or None,
            "links": r.links,
        }
    run = r.training_run
    if run is not None:
        out["training_run"] = {"tokens": run.tokens, "seconds": run.seconds,
                               "hours": run.seconds / 3600 if run.seconds is not None else None,
                               "gpu_hours": run.gpu_hours, "accelerator": r.speed_accelerator, "gpus": run.gpus,
                               "unknown": run.unknown or None}
    if r.serving_plan is not None:
        out["serving_plan"] = r.serving_plan.to_dict() | {"accelerator": r.speed_accelerator,
                                                          "price_source": r.plan_price_source}
    if r.burst_requests is not None and r.speed is not None:
        out["burst"] = _burst_json(r, r.burst_requests)
    if r.cost is not None:
        out["cost"] = r.cost.to_dict()
    return out


def _burst_json(r: PlanReport, n: int) -> dict[str, Any]:
    b = r.burst
    head = {"accelerator": r.speed_accelerator, "replicas": r.burst_replicas,
            "gpus_per_replica": r.workload.replica_gpus}
    if b is None:
        return head | {"requests": n, "unknown": f"no serving speed for {r.speed_accelerator} "
                                                 "(a published figure is missing)"}
    return b.to_dict()  # the whole setup, simulated (perf.sim_plan.BurstReport)
