"""The JSON of a :class:`~fleet_tui.core.plan.report.PlanReport` (``fleet-tui size --json``; the
keys are listed in :mod:`fleet_tui.commands.size`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fleet_tui.core.modelspec import param_counts

if TYPE_CHECKING:  # only for the annotation: the report module imports this one when asked
    from fleet_tui.core.plan.report import PlanReport


def _workload(r: PlanReport) -> dict[str, Any]:
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
        wd.update(engine=w.engine, kv_cache_dtype=w.kv_cache_dtype,
                  gpu_memory_utilization=w.gpu_memory_utilization,
                  max_num_batched_tokens=w.max_num_batched_tokens)
    if w.is_adapter:
        wd.update(lora_rank=w.lora_rank, lora_targets=list(w.lora_targets))
    return wd


def report_dict(r: PlanReport, label: Callable[[str], str]) -> dict[str, Any]:
    mem = r.memory
    v = r.verdict
    checked = v.status != "unchecked"
    out: dict[str, Any] = {
        "workload": _workload(r),
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
        out["burst"] = _burst(r, r.burst_requests)
    if r.cost is not None:
        out["cost"] = r.cost.to_dict()
    return out


def _burst(r: PlanReport, n: int) -> dict[str, Any]:
    b = r.burst
    head = {"accelerator": r.speed_accelerator, "replicas": r.burst_replicas,
            "gpus_per_replica": r.workload.replica_gpus}
    if b is None:
        return head | {"requests": n, "unknown": f"no serving speed for {r.speed_accelerator} "
                                                 "(a published figure is missing)"}
    return b.to_dict()  # the whole setup, simulated (perf.sim_plan.BurstReport)
