"""``fleet-tui size``: memory per GPU, fit, serving KV capacity and speed of one workload.

JSON (``--json``) keys: ``workload`` (what was sized), ``memory`` {``total_bytes``, ``total_gib``,
``per_gpu``, ``phase``, ``breakdown`` {component: bytes}, ``assumptions``}, ``accelerator``, ``gpus``,
``fits`` (bool, or null without ``--gpu``), ``capacity_bytes``, ``headroom_bytes``,
``precision_supported``, ``fit_message``, ``suggestions`` [{``description``, ``change``,
``total_bytes``, ``gpus``}], ``kv_capacity`` {``tokens``, ``concurrent_sequences``,
``bytes_per_token``, ``sequence_tokens``} (inference with ``--gpu``), ``throughput``
{``tokens_per_s``, ``phase``, ``prefill_tokens_per_s``, ``decode_tokens_per_s``,
``time_per_output_token_s``, ``time_to_first_token_s``, ``step_s``, ``mfu``, ``engine``, ``bound``,
``accelerator``, ``assumptions``, ``unknown``} and ``training_run`` {``tokens``, ``seconds``,
``gpu_hours``, ``unknown``} (training with ``--tokens``), ``serving_plan`` (with ``--rate`` or
``--tokens-per-s``: :class:`fleet_tui.core.perf.capacity.ServingPlan` fields — ``replicas``,
``devices``, ``concurrency_per_replica``, ``in_flight``, ``ttft_s``, ``tpot_s``, ``meets_slo``,
``usd_per_month``, ``usd_per_million_tokens``, ``notes`` — plus ``accelerator`` and ``price_source``),
``burst`` (with ``--burst N``: :class:`fleet_tui.core.perf.capacity.BurstSpeed` fields — ``requests``,
``concurrency``, ``waves``, ``ttft_s``, ``itl_s``, ``output_tokens_per_s``, ``duration_s`` — for the
whole setup, plus ``accelerator``, ``replicas`` and ``gpus_per_replica``; null when it does not fit).
The workload names its serving ``engine`` (default vllm) and ``kv_cache_dtype`` for inference, its
``framework`` and memory switches for training.

Unknown speed: ``throughput.tokens_per_s`` (and ``prefill_tokens_per_s``, ``time_to_first_token_s``,
``step_s``, ``mfu``, ``training_run.seconds``/``hours``/``gpu_hours``) is ``null`` when the accelerator's
catalog entry lacks the published figure the estimate needs (a dense peak for compute-bound training
and prefill, the memory bandwidth for decode); ``throughput.unknown`` then names the missing figure
("no published bf16 peak for A10G"). Decode is still estimated from the bandwidth alone.
``precision_note`` is set when the accelerator's support for the precision is undocumented (allowed).
"""

from __future__ import annotations

import argparse

#: Accelerator used for the speed estimate when no --gpu is given.
REFERENCE_ACCELERATOR = "H100"


def register(subparsers) -> None:
    from fleet_tui.commands._demand_args import add_demand_args
    from fleet_tui.commands._numbers import whole_number
    from fleet_tui.commands._workload_args import add_workload_args

    p = subparsers.add_parser(
        "size", help="memory per GPU, fit, KV capacity and speed of a workload",
        description="Estimate per-GPU memory (weights, gradients, optimizer, activations, logits,\n"
                    "KV cache, CUDA context, allocator slack), whether it fits an accelerator and\n"
                    "the smallest changes that make it fit, the serving KV-cache capacity, and\n"
                    "tokens/s. Memory is validated against 23 runs measured on an H200 (median\n"
                    "error ~1 %); speed describes the training stack (--framework, default hf) and\n"
                    "the serving engine (--engine, default vllm) it names. With --rate or\n"
                    "--tokens-per-s it plans replicas, devices and cost for the demand.",
        epilog="examples:\n"
               "  fleet-tui size --model llama-3.1-8b --workload inference --seq-len 2048 --gpu H100\n"
               "  fleet-tui size --model llama-3.1-70b --workload lora --batch 4 --seq-len 2048 --gpu A100-80GB\n"
               "  fleet-tui size --params 7B --workload finetune --seq-len 4096 --gpu L40S --json\n"
               "  fleet-tui size --model-config ./config.json --prompt-len 1024 --gen-len 256 --batch 32 --gpu H200\n"
               "  fleet-tui size --model llama-3.1-8b --prompt-len 1000 --gen-len 200 --gpu H100 --engine trtllm \\\n"
               "      --kv-cache-dtype fp8 --rate 20 --ttft-ms 500 --tpot-ms 30\n"
               "  fleet-tui size --model llama-3.1-405b --workload qlora --seq-len 2048 --batch 2 --gpus 8 \\\n"
               "      --gpu A100-80GB --framework torchtune",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_workload_args(p)
    o = p.add_argument_group("size")
    o.add_argument("--gpu", metavar="ACCELERATOR", help="accelerator to check the fit on, e.g. H100, "
                   "L40S, A100-80GB (see `fleet-tui catalog accelerators`)")
    o.add_argument("--tokens", metavar="N", help="training: tokens of the whole run, for time and "
                   "GPU-hours (e.g. 50M, 20B, 1e9)")
    o.add_argument("--json", action="store_true", help="JSON on stdout")
    o.add_argument("--network", metavar="NET", default=None,
                     help="network between nodes: Gbit/s per node (3200G, 3.2T), per device (400G/gpu) or a "
                          "fabric name (efa-v2, efa, ib-ndr, ib-hdr, ib-xdr, roce-400, tcpxo, tcpx, "
                          "ethernet-100g); default: the priced offer's, else the device's usual one, stated")
    o.add_argument("--burst", metavar="N", type=whole_number,
                   help="inference: N requests sent at once, as a benchmark at request rate inf "
                        "(e.g. vllm bench serve --num-prompts N): mean first token, time between "
                        "tokens and throughput until the last one ends")
    add_demand_args(p, "serving capacity plan (inference with --prompt-len/--gen-len)")
    p.set_defaults(func=handler)


def _gib(b: float) -> str:
    return f"{b / (1 << 30):,.2f}"


def handler(args: argparse.Namespace) -> int:
    from fleet_tui.commands._workload_args import workload_from_args
    from fleet_tui.core.catalog import load_catalog
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.sizing import precision_support, size_workload
    from fleet_tui.core.workload import parse_run_tokens

    catalog = load_catalog(list(getattr(args, "catalog_dir", None) or []))
    workload = workload_from_args(args, catalog)
    acc = catalog.accelerator(args.gpu) if args.gpu else None
    tokens = parse_run_tokens(args.tokens, "tokens") if args.tokens else None
    if tokens is not None and not workload.is_training:
        raise UserError("--tokens (a training run's length) applies to training workloads")
    if args.burst is not None and not workload.is_generation:
        raise UserError("--burst N (requests sent at once) needs generation: give --prompt-len and "
                        "--gen-len (inference)")
    if acc is not None:
        ok, msg = precision_support(workload.precision, acc)
        if not ok:
            raise UserError(f"--precision {workload.precision}: {msg}")
    fabric = None
    if acc is not None and workload.gpus > 1:
        from fleet_tui.core.perf.fabric import job_fabric

        fabric = job_fabric(catalog, acc, workload.gpus, getattr(args, "network", None))
    if acc is not None and args.sharding is None and not any(
            getattr(args, f, None) for f in ("tp", "pp", "dp", "zero", "cp")):
        from fleet_tui.core.sizing.layout import auto_layout

        # the cheapest layout that fits, the fastest of the first few on the job's links
        workload = auto_layout(workload, acc, workload.gpus, fabric.fabric if fabric else None)
    res = size_workload(workload, acc, workload.gpus, fabric.fabric if fabric else None)
    speed_acc = acc
    thr = res.throughput
    misfit = res.fit is not None and not res.fit.fits
    if misfit:
        thr = None  # nothing that does not fit gets a speed
    elif thr is None:
        try:
            speed_acc = catalog.accelerator(REFERENCE_ACCELERATOR)
        except UserError:
            speed_acc = next(iter(catalog.accelerators.values()), None)
        if speed_acc is not None:
            from fleet_tui.core.perf import estimate_throughput

            thr = estimate_throughput(workload, speed_acc, workload.gpus)
    run = None
    if tokens is not None and speed_acc is not None and not misfit:
        from fleet_tui.core.perf.run import training_run

        run = training_run(workload, speed_acc, workload.gpus, tokens,
                           fabric.fabric if fabric is not None and speed_acc is acc else None)
    data = _to_dict(res, thr, speed_acc, acc, run, catalog)
    data["fabric"] = fabric.words if fabric is not None else None
    data["serving_plan"] = _plan(args, workload, catalog, speed_acc)
    data["burst"] = (_burst(workload, speed_acc, args.burst)
                     if args.burst is not None and speed_acc is not None and not misfit else None)
    data["cost"] = None
    if acc is not None and res.fit is not None and res.fit.fits:
        from fleet_tui.core.catalog.query import cheapest_setup

        cost = (fabric.setup if fabric is not None and fabric.setup is not None and thr is None else
                cheapest_setup(catalog, acc.id, workload.gpus,
                               tokens_per_s=thr.tokens_per_s if thr is not None else None))
        if fabric is not None and fabric.setup is not None:  # priced on the offer whose links were assumed
            from fleet_tui.core.pricing import cost_per_million_tokens

            cost = fabric.setup
            if thr is not None and thr.tokens_per_s:
                import dataclasses

                cost = dataclasses.replace(cost, usd_per_million_tokens=cost_per_million_tokens(
                    cost.usd_per_hour, thr.tokens_per_s))
        data["cost"] = cost.to_dict() if cost is not None else None
    if args.json:
        from fleet_tui.commands._output import print_json

        print_json(data)
    else:
        print(_render(data))
    return 0


def _plan(args, workload, catalog, acc) -> dict | None:
    """The serving capacity plan (core.perf.capacity.serving_plan) when a demand is given."""
    from fleet_tui.commands._demand_args import demand_from_args

    d = demand_from_args(args, workload)
    if d is None:
        return None
    if acc is None:
        return None
    from fleet_tui.core.perf.capacity import serving_plan
    from fleet_tui.core.catalog.query import cheapest_setup

    gpus = workload.replica_gpus
    setup = cheapest_setup(catalog, acc.id, gpus)
    price = setup.usd_per_hour / gpus if setup is not None else None
    plan = serving_plan(workload, acc, gpus, workload.prompt_len, workload.gen_len, rate_rps=d.rate_rps,
                        output_tokens_per_s=d.output_tokens_per_s, ttft_ms=d.ttft_ms, tpot_ms=d.tpot_ms,
                        usd_per_device_hour=price)
    out = plan.to_dict()
    out["accelerator"] = acc.id
    out["price_source"] = (f"cheapest on-demand offer for {gpus}× {acc.id}: {setup.instance.instance_type} "
                           f"({setup.instance.cloud} {setup.instance.region}), per device-hour"
                           if setup is not None else None)
    return out


def _burst(workload, acc, n: int) -> dict:
    """``n`` requests at once (core.perf.capacity.burst_speed), split evenly over the replicas."""
    from fleet_tui.core.perf.capacity import burst_speed

    gpus = workload.replica_gpus
    replicas = max(1, workload.gpus // gpus)
    per_replica = -(-n // replicas)  # the busiest replica sets the burst's end
    b = burst_speed(workload, acc, gpus, workload.prompt_len, workload.gen_len, per_replica)
    out = {"accelerator": acc.id, "replicas": replicas, "gpus_per_replica": gpus}
    if b is None:
        return out | {"requests": n, "unknown": f"no serving speed for {acc.id} (a published figure is missing)"}
    # the whole setup: every request, every replica's tokens, the slowest replica's duration
    return out | b.to_dict() | {"requests": n, "concurrency": b.concurrency * replicas,
                      "output_tokens_per_s": n * workload.gen_len / b.duration_s}


def _render_burst(b: dict) -> list[str]:
    if b.get("unknown"):
        return ["", f"Burst of {b['requests']:,} requests on {b['accelerator']}: {b['unknown']}"]
    split = f" over {b['replicas']} replicas" if b["replicas"] > 1 else ""
    waves = f" in {b['waves']:,} waves" if b["waves"] > 1 else ""
    return ["", f"Burst of {b['requests']:,} requests at once on {b['accelerator']}{split}: "
                f"{b['concurrency']:,} run at a time{waves}",
            f"  first token {b['ttft_s'] * 1e3:,.0f} ms (mean), {b['itl_s'] * 1e3:,.1f} ms between tokens, "
            f"{b['output_tokens_per_s']:,.0f} output tokens/s, last request ends after {b['duration_s']:,.1f} s"]


def _render_plan(p: dict) -> list[str]:
    from fleet_tui.core.ranking import money

    if p["replicas"] is None:
        return ["", f"Serving plan on {p['accelerator']}: speed unknown ({p['unknown']})"]
    slo = "meets the targets" if p["meets_slo"] else "CANNOT meet the targets"
    lines = ["", f"Serving plan on {p['accelerator']} ({p['engine']}): {p['rate_rps']:g} req/s of "
                 f"{p['prompt_tokens']:,} + {p['gen_tokens']:,} tokens ({p['output_tokens_per_s']:,.0f} output tokens/s)",
             f"  {p['replicas']} replica(s) × {p['gpus_per_replica']} GPU = {p['devices']} GPUs, "
             f"{p['concurrency_per_replica']} sequences in flight per replica, {p['in_flight']:,.1f} in flight "
             f"overall; first token {p['ttft_s'] * 1e3:,.0f} ms, {p['tpot_s'] * 1e3:,.1f} ms per token ({slo})"]
    if p["usd_per_month"] is not None:
        lines.append(f"  {money(p['usd_per_month'])}/month on-demand, {money(p['usd_per_million_tokens'])} per 1M "
                     f"output tokens ({p['price_source']})")
    return lines


def _layout_label(w, gpus: int) -> str | None:
    from fleet_tui.core.footprint import parallel_layout

    return parallel_layout(w, gpus).label() if gpus > 1 else None


def _suggestions(res, acc, catalog) -> list:
    """The fit's own suggestions, then (a misfit) the smallest larger catalog devices that fit."""
    fit = res.fit
    if fit is None:
        return []
    out = list(fit.suggestions)
    if not fit.fits and catalog is not None:
        from fleet_tui.core.sizing.fit import bigger_devices

        accs = catalog.accelerators
        out += bigger_devices(res.workload, res.gpus, acc, accs.values() if isinstance(accs, dict) else accs)
    return out


def _to_dict(res, thr, speed_acc, acc, run, catalog=None) -> dict:
    from fleet_tui.commands._workload_args import flag
    from fleet_tui.core.modelspec import param_counts

    w = res.workload
    arch = w.arch
    pc = param_counts(arch)
    mem = res.memory
    fit = res.fit
    wd = {
        "model": arch.id, "model_name": arch.name or arch.id, "params": pc.total,
        "active_params": pc.active, "kind": w.kind, "precision": w.precision, "batch": w.batch,
        "seq_len": w.seq_len, "target_len": w.target_len, "prompt_len": w.prompt_len, "gen_len": w.gen_len, "gpus": w.gpus,
        "sharding": w.sharding,
        "layout": _layout_label(w, res.gpus),
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
    out: dict = {
        "workload": wd,
        "memory": {"total_bytes": mem.total_bytes, "total_gib": round(mem.total_gib, 3), "per_gpu": mem.per_gpu,
                   "phase": mem.phase, "breakdown": dict(mem.breakdown), "assumptions": mem.notes(flag)},
        "accelerator": acc.id if acc is not None else None,
        "gpus": res.gpus,
        "fits": fit.fits if fit is not None else None,
        "capacity_bytes": fit.capacity_bytes if fit is not None else None,
        "headroom_bytes": fit.headroom_bytes if fit is not None else None,
        "precision_supported": fit.precision_supported if fit is not None else None,
        "precision_note": (fit.precision_note or None) if fit is not None else None,
        "fit_message": fit.message if fit is not None else None,
        "suggestions": [{"description": s.render(flag), "change": s.change, "total_bytes": s.total_bytes,
                         "gpus": s.gpus} for s in _suggestions(res, acc, catalog)],
        "kv_capacity": None,
        "throughput": None,
        "training_run": None,
    }
    kv = res.kv_capacity
    if kv is not None:
        out["kv_capacity"] = {"tokens": kv.tokens, "concurrent_sequences": kv.concurrent_sequences,
                              "bytes_per_token": kv.bytes_per_token, "sequence_tokens": kv.sequence_tokens}
    if thr is not None:
        assumptions = list(thr.assumptions)
        if acc is None and speed_acc is not None:
            assumptions.insert(0, f"no --gpu given: speed shown for {speed_acc.id}")
        out["throughput"] = {
            "tokens_per_s": thr.tokens_per_s, "phase": thr.phase,
            "prefill_tokens_per_s": thr.prefill_tokens_per_s, "decode_tokens_per_s": thr.decode_tokens_per_s,
            "time_per_output_token_s": thr.time_per_output_token_s,
            "time_to_first_token_s": thr.time_to_first_token_s, "step_s": thr.step_s, "mfu": thr.mfu,
            "engine": thr.engine, "bound": thr.bound,
            "accelerator": speed_acc.id if speed_acc is not None else None, "assumptions": assumptions,
            "unknown": thr.unknown or None,
        }
    if run is not None:
        out["training_run"] = {"tokens": run.tokens, "seconds": run.seconds,
                               "hours": run.seconds / 3600 if run.seconds is not None else None,
                               "gpu_hours": run.gpu_hours, "accelerator": speed_acc.id, "gpus": run.gpus,
                               "unknown": run.unknown or None}
    return out


def _render(d: dict) -> str:
    from fleet_tui.commands._output import format_table
    from fleet_tui.core.sizing import COMPONENT_HELP

    w = d["workload"]
    shape = ""
    if w["seq_len"] and w.get("target_len"):
        shape = f", batch {w['batch']} × ({w['seq_len']} source + {w['target_len']} target) tokens"
    elif w["seq_len"]:
        shape = f", batch {w['batch']} × {w['seq_len']} tokens"
    elif w["prompt_len"]:
        shape = f", batch {w['batch']}, prompt {w['prompt_len']} + {w['gen_len']} generated tokens"
    elif w["kind"] == "inference":
        shape = ", model loaded"
    active = f", {w['active_params'] / 1e9:.1f}B active" if w["active_params"] != w["params"] else ""
    gpus = f", {w['gpus']} GPUs ({w.get('layout') or w['sharding']})" if w["gpus"] > 1 else ""
    lines = [f"{w['model_name']} ({w['params'] / 1e9:.2f}B parameters{active}): {w['kind']}, "
             f"{w['precision']}{shape}{gpus}"]
    mem = d["memory"]
    total = mem["total_bytes"] or 1
    rows = [(k, _gib(v), f"{100 * v / total:.1f}%", COMPONENT_HELP.get(k, ""))
            for k, v in mem["breakdown"].items()]
    rows.append(("total", _gib(mem["total_bytes"]), "100.0%", f"peak: {mem['phase']}"))
    lines += ["", "Memory per GPU (GiB):", format_table(("component", "GiB", "share", "what"), rows)]
    if d["fits"] is not None:
        verdict = "FITS" if d["fits"] else "DOES NOT FIT"
        lines += ["", f"{verdict} on {d['gpus']}× {d['accelerator']}: {d['fit_message']}"]
        if d["suggestions"]:
            lines.append("Smallest changes that make it fit:")
            for s in d["suggestions"]:
                lines.append(f"  - {s['description']} -> {_gib(s['total_bytes'])} GiB per GPU")
        elif not d["fits"]:
            lines.append("No change on these or more of these devices makes it fit; try a larger accelerator.")
        if not d["fits"]:
            lines.append("Speed: not estimated (it does not fit).")
    kv = d["kv_capacity"]
    engine = ""
    if "engine" in w:
        engine = (" (hf grows its cache per request: the pool vllm would keep)" if w["engine"] == "hf"
                  else f" ({w['engine']}{' default' if w['engine'] == 'vllm' else ''})")
    if kv is not None and kv["tokens"] == 0:
        lines += ["", f"Serving KV cache{engine}: no room left (weights and runtime fill the engine's "
                      "memory budget)"]
    elif kv is not None:
        lines += ["", f"Serving KV cache{engine}: {kv['tokens']:,} tokens ({kv['bytes_per_token']:,} B/token), "
                      f"{kv['concurrent_sequences']:,} concurrent sequences of {kv['sequence_tokens']:,} tokens"]
    if d.get("serving_plan"):
        lines += _render_plan(d["serving_plan"])
    if d.get("burst"):
        lines += _render_burst(d["burst"])
    t = d["throughput"]
    if t is not None:
        lines += ["", f"Speed on {t['accelerator']} ({t['engine']}"
                      + (f", {t['bound']}-bound):" if t["tokens_per_s"] is not None else "):")]
        if d.get("fabric"):
            lines.append(f"  links: {d['fabric']}")

        def num(x, fmt: str, scale: float = 1.0) -> str:
            return "unknown" if x is None else format(x * scale, fmt)

        if t["tokens_per_s"] is None and t["phase"] != "decode":
            lines.append(f"  {'training' if t['phase'] == 'training' else 'forward pass'} speed unknown: "
                         f"{t['unknown']}")
        elif t["phase"] == "training":
            mfu = f", MFU {t['mfu']:.0%}" if t["mfu"] else ""
            per = (f" ({t['tokens_per_s'] / d['gpus']:,.0f} per device)" if d.get("gpus", 1) > 1 else "")
            lines.append(f"  training {t['tokens_per_s']:,.0f} tokens/s{per}, step {t['step_s']:.3f} s{mfu}")
        elif t["phase"] == "prefill":
            lines.append(f"  forward pass {t['tokens_per_s']:,.0f} tokens/s ({t['step_s']:.3f} s per pass)")
        elif t["tokens_per_s"] is None:
            lines.append(f"  decode speed unknown: {t['unknown']}")
        else:
            pre = ("prefill and first token unknown (no published peak)"
                   if t["prefill_tokens_per_s"] is None else
                   f"prefill {t['prefill_tokens_per_s']:,.0f} tokens/s, first token "
                   f"{num(t['time_to_first_token_s'], '.0f', 1000)} ms")
            lines.append(f"  decode {t['tokens_per_s']:,.0f} output tokens/s, "
                         f"{t['time_per_output_token_s'] * 1000:.1f} ms per token; {pre}")
    r = d["training_run"]
    if r is not None and r["seconds"] is None:
        lines.append(f"  run of {r['tokens']:,} tokens: time unknown ({r['unknown']})")
    elif r is not None:
        lines.append(f"  run of {r['tokens']:,} tokens: {r['hours']:,.1f} h, {r['gpu_hours']:,.1f} GPU-hours")
    c = d.get("cost")
    if c is not None:
        from fleet_tui.core.ranking import money

        boxes = f"{c['instances']}× " if c["instances"] > 1 else ""
        per_m = (f", {money(c['usd_per_million_tokens'])} per 1M tokens"
                 if c["usd_per_million_tokens"] is not None else "")
        idle = f"; {c['idle_devices']:g} of its devices idle" if c["idle_devices"] else ""
        lines += ["", f"Cost: {money(c['usd_per_hour'])}/h, {money(c['usd_per_month'])}/month at "
                      f"{c['hours_per_month']:g} h{per_m}",
                  f"  cheapest {c['pricing']} offer with {d['gpus']}× {d['accelerator']}: {boxes}"
                  f"{c['instance_type']} ({c['cloud']} {c['region']}){idle}; "
                  "'fleet-tui recommend' ranks them all"]
    notes = list(mem["assumptions"]) + (list(t["assumptions"]) if t else [])
    if notes:
        lines += ["", "Assumptions:"] + [f"  - {n}" for n in dict.fromkeys(notes)]
    return "\n".join(lines)
