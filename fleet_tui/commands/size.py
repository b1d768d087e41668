"""``fleet-tui size``: memory per GPU, fit, serving KV capacity and speed of one workload.

JSON (``--json``) keys: ``workload`` (what was sized), ``memory`` {``total_bytes``, ``total_gib``,
``per_gpu``, ``phase``, ``breakdown`` {component: bytes}, ``assumptions``}, ``accelerator``, ``gpus``,
``fits`` (bool, or null without ``--gpu``), ``capacity_bytes``, ``headroom_bytes``,
``precision_supported``, ``fit_message``, ``suggestions`` [{``description``, ``change``,
``total_bytes``, ``gpus``}], ``kv_capacity`` {``tokens``, ``concurrent_sequences``,
``bytes_per_token``, ``sequence_tokens``} (inference with ``--gpu``), ``throughput``
{``tokens_per_s``, ``phase``, ``prefill_tokens_per_s``, ``decode_tokens_per_s``,
``time_per_output_token_s``, ``time_to_first_token_s``, ``step_s``, ``mfu``, ``engine``, ``bound``,
``accelerator``, ``assumptions``, ``unknown``, ``links`` (the links the speed was charged on and where
they come from: the priced offer, ``--network``, or the device's reference system)} and
``training_run`` {``tokens``, ``seconds``, ``gpu_hours``, ``unknown``} (training with ``--tokens``),
``serving_plan`` (with ``--rate`` or
``--tokens-per-s``: :class:`fleet_tui.core.perf.serving_plan.ServingPlan` fields — ``replicas``,
``devices``, ``concurrency_per_replica``, ``in_flight``, ``ttft_s``, ``tpot_s``, ``meets_slo``,
``usd_per_month``, ``usd_per_million_tokens``, ``notes`` — plus ``accelerator`` and ``price_source``),
``burst`` (with ``--burst N``: :class:`fleet_tui.core.perf.serving_plan.BurstSpeed` fields — ``requests``,
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

from fleet_tui.commands._names import given_name


def register(subparsers) -> None:
    from fleet_tui.commands._demand_args import add_demand_args
    from fleet_tui.commands._numbers import whole_number
    from fleet_tui.commands._workload_args import add_network_arg, add_workload_args

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
    o.add_argument("--gpu", type=given_name, metavar="ACCELERATOR", help="accelerator to check the "
                   "fit on, e.g. H100, L40S, A100-80GB (see `fleet-tui catalog accelerators`)")
    o.add_argument("--tokens", metavar="N", help="training: tokens of the whole run, for time and "
                   "GPU-hours (e.g. 50M, 20B, 1e9)")
    o.add_argument("--json", action="store_true", help="JSON on stdout")
    add_network_arg(o)
    o.add_argument("--burst", metavar="N", type=whole_number,
                   help="inference: N requests sent at once, as a benchmark at request rate inf "
                        "(e.g. vllm bench serve --num-prompts N): mean first token, time between "
                        "tokens and throughput until the last one ends")
    add_demand_args(p, "serving capacity plan (inference with --prompt-len/--gen-len)")
    p.set_defaults(func=handler)


def _gib(b: float) -> str:
    return f"{b / (1 << 30):,.2f}"


def handler(args: argparse.Namespace) -> int:
    """Plan the workload (:func:`fleet_tui.core.plan.plan_workload`) and print its report."""
    from fleet_tui.commands._catalog_args import load_user_catalog
    from fleet_tui.commands._demand_args import demand_from_args
    from fleet_tui.commands._workload_args import flag, workload_from_args
    from fleet_tui.core.plan import PlanRequest, plan_workload
    from fleet_tui.core.workload import parse_run_tokens

    catalog = load_user_catalog(getattr(args, "catalog_dir", None))
    workload = workload_from_args(args, catalog)
    tokens = parse_run_tokens(args.tokens, "tokens") if args.tokens else None
    if args.gpu:
        _check_accelerator(catalog, args.gpu)
    layout_given = args.sharding is not None or any(getattr(args, f, None) for f in ("tp", "pp", "dp", "zero", "cp"))
    report = plan_workload(PlanRequest(workload, args.gpu, layout_given=layout_given,
                                       demand=demand_from_args(args, workload), training_tokens=tokens,
                                       burst=args.burst, network=getattr(args, "network", None)), catalog)
    data = report.to_dict(flag)
    if args.json:
        from fleet_tui.commands._output import print_json

        print_json(data)
    else:
        print(_render(data))
    return 0


def _check_accelerator(catalog, name: str) -> None:
    """An unknown ``--gpu`` is a mistake of that flag: the error names it."""
    from fleet_tui.core.errors import FieldError, UserError, escape_braces

    try:
        catalog.accelerator(name)
    except UserError as exc:
        raise FieldError("gpu", "{gpu}: " + escape_braces(str(exc))) from None


def _render_burst(b: dict) -> list[str]:
    if b.get("unknown"):
        return ["", f"Burst of {b['requests']:,} requests on {b['accelerator']}: {b['unknown']}"]
    split = f" over {b['replicas']} replicas" if b["replicas"] > 1 else ""
    pre = f", {b['preemptions']:,} preemptions" if b["preemptions"] else ""
    return ["", f"Burst of {b['requests']:,} requests at once on {b['accelerator']}{split}: "
                f"{b['concurrency']:,} run at a time at most (simulated scheduler{pre})",
            f"  first token {b['ttft_s'] * 1e3:,.0f} ms mean (p50 {b['ttft_p50_s'] * 1e3:,.0f}, p95 "
            f"{b['ttft_p95_s'] * 1e3:,.0f}), {b['itl_s'] * 1e3:,.1f} ms per token mean (p95 "
            f"{b['tpot_p95_s'] * 1e3:,.1f}), {b['output_tokens_per_s']:,.0f} output tokens/s, last request "
            f"ends after {b['duration_s']:,.1f} s"]


def _render_plan(p: dict) -> list[str]:
    from fleet_tui.core.ranking import money

    if p["replicas"] is None:
        return ["", f"Serving plan on {p['accelerator']}: speed unknown ({p['unknown']})"]
    slo = ""
    if p.get("has_targets"):
        slo = " (meets the targets)" if p["meets_slo"] else " (CANNOT meet the targets)"
    pct = f"p{p['slo_percentile']:g} " if p.get("slo_percentile") is not None and p.get("simulated") else "mean "
    lines = ["", f"Serving plan on {p['accelerator']} ({p['engine']}): {p['rate_rps']:g} req/s of "
                 f"{p['prompt_tokens']:,} + {p['gen_tokens']:,} tokens "
                 f"({p['output_tokens_per_s']:,.0f} output tokens/s)",
             f"  {p['replicas']} replica(s) × {p['gpus_per_replica']} GPU = {p['devices']} GPUs, "
             f"{p['concurrency_per_replica']} sequences in flight per replica, {p['in_flight']:,.1f} in flight "
             f"overall; at this load {pct}first token {p['ttft_s'] * 1e3:,.0f} ms, {pct}{p['tpot_s'] * 1e3:,.1f} ms "
             f"per token{slo}"]
    sim = p.get("simulated")
    if sim:
        lines.append(f"  simulated per replica at {sim['rate_rps']:.3g} req/s: first token p50/p95/p99 "
                     f"{sim['ttft_p50_s'] * 1e3:,.0f}/{sim['ttft_p95_s'] * 1e3:,.0f}/"
                     f"{sim['ttft_p99_s'] * 1e3:,.0f} ms, "
                     f"per token {sim['tpot_p50_s'] * 1e3:,.1f}/{sim['tpot_p95_s'] * 1e3:,.1f}/"
                     f"{sim['tpot_p99_s'] * 1e3:,.1f} ms, end to end {sim['e2e_p50_s']:,.2f}/{sim['e2e_p95_s']:,.2f}/"
                     f"{sim['e2e_p99_s']:,.2f} s; queue {sim['queue_mean']:.1f}, KV pool {sim['kv_use_mean']:.0%} used")
    if p["usd_per_month"] is not None:
        lines.append(f"  {money(p['usd_per_month'])}/month on-demand, {money(p['usd_per_million_tokens'])} per 1M "
                     f"output tokens ({p['price_source']})")
    return lines


def _render(d: dict) -> str:  # long: the report's sections in print order, each a few lines
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
    v = d["verdict"]
    if d["fits"] is not None:
        verdict = {"fits": "FITS", "does_not_fit": "DOES NOT FIT", "starts": "STARTS",
                   "does_not_start": "DOES NOT START"}[v["status"]]
        lines += ["", f"{verdict} on {d['gpus']}× {d['accelerator']}: {d['fit_message']}"]
        if v["engine_error"]:
            lines.append(f"  the engine says: {v['engine_error']}")
        e = d.get("engine")
        if e is not None:
            parts = ", ".join(f"{k.replace('_', ' ')} {_gib(b)}" for k, b in e["parts"].items() if b)
            lines.append(f"  {e['engine']} reserves {_gib(e['reserved_bytes'])} GiB per GPU: {parts} GiB")
        if d["suggestions"]:
            lines.append("Smallest changes that make it " + ("start:" if v["status"] == "does_not_start" else "fit:"))
            for s in d["suggestions"]:
                lines.append(f"  - {s['description']} -> {_gib(s['total_bytes'])} GiB per GPU")
        elif not d["fits"]:
            lines.append("No change on these or more of these devices makes it fit; try a larger accelerator.")
        if not d["fits"]:
            lines.append("Speed: not estimated (it does not "
                         + ("start)." if v["status"] == "does_not_start" else "fit)."))
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
        if t.get("links"):
            lines.append(f"  links: {t['links']}")

        def num(x, fmt: str, scale: float = 1.0) -> str:
            return "unknown" if x is None else format(x * scale, fmt)

        if t["tokens_per_s"] is None and t["phase"] != "decode":
            lines.append(f"  {'training' if t['phase'] == 'training' else 'forward pass'} speed unknown: "
                         f"{t['unknown']}")
        elif t["phase"] == "training":
            mfu = f", MFU {t['mfu']:.0%}" if t["mfu"] else ""
            per = f" ({t['tokens_per_s'] / d['gpus']:,.0f} per device)" if d.get("gpus", 1) > 1 else ""
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
