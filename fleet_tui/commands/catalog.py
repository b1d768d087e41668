"""``fleet-tui catalog``: list, filter and validate the catalog; import SkyPilot CSVs.

Engine imports happen inside handlers so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

_TABLE_LIMIT = 50  # rows a table shows by default (JSON/CSV give everything unless --limit)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("catalog", help="list, filter and validate the catalog; import SkyPilot CSVs",
                              description="Browse the accelerator, model and instance catalogs "
                                          "(bundled + user + --catalog-dir).")
    sub = p.add_subparsers(dest="catalog_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: _no_sub(p))

    def listing(name: str, help_text: str, sort_default: str, func,
                example: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.add_argument("--filter", default=None, metavar="EXPR",
                        help=f"comma-separated FIELD OP VALUE, OP one of = != < <= > >= ~ (e.g. {example})")
        sp.add_argument("--sort", default=sort_default, metavar="FIELD", help=f"sort field (default {sort_default})")
        sp.add_argument("--desc", action="store_true", help="sort descending")
        sp.add_argument("--limit", type=int, default=None, metavar="N",
                        help=f"at most N rows (tables default to {_TABLE_LIMIT})")
        fmt = sp.add_mutually_exclusive_group()
        fmt.add_argument("--json", action="store_true", help="JSON on stdout")
        fmt.add_argument("--csv", action="store_true", help="CSV on stdout")
        sp.set_defaults(func=func)
        return sp

    inst = listing("instances", "cloud instance offers with prices", "price", _cmd_instances,
                   "cloud=aws,accelerator=H100,price<40,memory>=80")
    inst.add_argument("--pricing", default="on-demand", choices=("on-demand", "spot", "reserved-1y", "reserved-3y"),
                      help="which price `price`, sorting and the table use (default on-demand)")
    inst.add_argument("--hide-excluded", action="store_true",
                      help="leave out offers that must not be ranked (they are shown, flagged, by default)")
    listing("accelerators", "accelerator specifications (dense peak TFLOP/s per precision)", "id",
            _cmd_accelerators, "vendor=AMD,bf16>=900,memory>=128")
    listing("models", "model architectures", "id", _cmd_models, "params_b>=70,family~llama")

    v = sub.add_parser("validate", help="check catalog files; prints file:line: field: message, exit 2 if any",
                       description="Check catalog TOML files (or directories). With no PATH, checks the bundled "
                                   "and user catalogs and every --catalog-dir.")
    v.add_argument("paths", nargs="*", metavar="PATH")
    v.set_defaults(func=_cmd_validate)

    imp = sub.add_parser("import-skypilot", help="generate instances/<cloud>.toml from SkyPilot vms.csv files",
                         description="Read SkyPilot v8 vms.csv files (columns by name) and write one "
                                     "<cloud>.toml per cloud, atomically.")
    imp.add_argument("files", nargs="+", metavar="FILE")
    imp.add_argument("--out-dir", default=None, metavar="DIR",
                     help="where <cloud>.toml goes (default: the user catalog's instances/ directory, "
                          "which overrides the bundled offers with the same id)")
    imp.add_argument("--cloud", default=None, metavar="NAME",
                     help="cloud of every FILE (default: from the directory or file name)")
    imp.add_argument("--as-of", default=None, metavar="DATE", help="ISO date the prices were taken")
    imp.add_argument("--force", action="store_true", help="replace <cloud>.toml files that exist")
    imp.set_defaults(func=_cmd_import)


def _no_sub(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _catalog(args: argparse.Namespace):
    from fleet_tui.commands._catalog_args import load_user_catalog

    return load_user_catalog(getattr(args, "catalog_dir", None))


def _emit(args: argparse.Namespace, headers: list[str], rows: list[list[Any]], records: list[dict], total: int) -> None:
    from fleet_tui.commands._output import print_json, print_table

    if args.json:
        print_json(records)
    elif args.csv:
        import csv

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(list(records[0].keys()) if records else headers)
        for r in records:
            w.writerow(["|".join(map(str, v)) if isinstance(v, (list, tuple)) else ("" if v is None else v)
                        for v in r.values()])
    else:
        print_table(headers, rows)
        if total > len(rows):
            print(f"({len(rows)} of {total} rows; use --limit N, --filter or --json for more)")


def _limit(args: argparse.Namespace) -> int | None:
    if args.limit is not None:
        if args.limit < 0:
            from fleet_tui.core.errors import UserError

            raise UserError(f"--limit {args.limit}: must be 0 or more")
        return args.limit
    return None if (args.json or args.csv) else _TABLE_LIMIT


def _sorted_page(args: argparse.Namespace, rows: list[dict], key: str, fields) -> tuple[list[dict], int]:
    """``rows`` sorted by ``key`` (one of ``fields``) and cut to ``--limit``, and how many there were."""
    from fleet_tui.core.catalog.query import sort_rows

    if key not in fields:
        from fleet_tui.core.errors import UserError

        raise UserError(f"--sort '{args.sort}': unknown field; fields: {', '.join(fields)}")
    rows = sort_rows(rows, key, args.desc)
    lim = _limit(args)
    return (rows[:lim] if lim is not None else rows), len(rows)


def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}" if abs(x) < 1e6 else f"{x:,.0f}"


def _cmd_instances(args: argparse.Namespace) -> int:
    from fleet_tui.core.catalog.query import parse_filter, query_instances

    cat = _catalog(args)
    conds = parse_filter(args.filter)
    res = query_instances(cat, conditions=conds, pricing=args.pricing, sort=args.sort, descending=args.desc,
                          limit=_limit(args), include_excluded=not args.hide_excluded)
    other = "on-demand" if args.pricing == "spot" else "spot"
    headers = ["cloud", "instance_type", "region", "accelerator", "count", "mem_GiB", "vCPUs", "RAM_GiB",
               f"{args.pricing}_$/h", "$/GPU-h", other + "_$/h", "flags"]
    rows = []
    records = []
    for i in res.rows:
        note = i.excluded and f"EXCLUDED: {i.excluded}" or ""
        if i.flags:
            note = (note + "; " if note else "") + "; ".join(i.flag_codes)
        rows.append([i.cloud, i.instance_type, i.region, i.accelerator, f"{i.accelerator_count:g}",
                     _fmt(i.accelerator_memory_gib, 1), _fmt(i.vcpus, 0), _fmt(i.ram_gib, 0),
                     _fmt(i.price(args.pricing), 3), _fmt(i.usd_per_gpu_hour(args.pricing), 3),
                     _fmt(i.price(other), 3), note])
        records.append({
            "cloud": i.cloud, "instance_type": i.instance_type, "region": i.region, "zones": i.zones,
            "accelerator": i.accelerator, "accelerator_count": i.accelerator_count,
            "accelerator_memory_gib": i.accelerator_memory_gib, "vcpus": i.vcpus, "ram_gib": i.ram_gib,
            "on_demand_usd_per_hour": i.on_demand_usd_per_hour, "spot_usd_per_hour": i.spot_usd_per_hour,
            "reserved_1y_usd_per_hour": i.reserved_1y_usd_per_hour,
            "reserved_3y_usd_per_hour": i.reserved_3y_usd_per_hour, "reserved_estimated": i.reserved_estimated,
            "price_usd_per_hour": i.price(args.pricing), "usd_per_gpu_hour": i.usd_per_gpu_hour(args.pricing),
            "pricing": args.pricing, "flags": list(i.flags), "excluded": i.excluded,
            "excluded_pricing": list(i.excluded_pricing), "source": i.source, "as_of": i.as_of,
        })
    _emit(args, headers, rows, records, res.total)
    return 0


_ACC_FIELDS = {"id": "text", "name": "text", "vendor": "text", "software_stack": "text", "memory": "number",
               "bandwidth": "number", "fp32": "number", "tf32": "number", "bf16": "number", "fp16": "number",
               "fp8": "number", "int8": "number", "int4": "number", "tdp": "number", "interconnect": "text",
               "architecture": "text", "year": "number"}
_ACC_ALIASES = {"memory_gib": "memory", "mem": "memory", "memory_bandwidth_gbs": "bandwidth", "tdp_w": "tdp",
                "launch_year": "year", "stack": "software_stack", "accelerator": "id", "alias": "id"}


def _cmd_accelerators(args: argparse.Namespace) -> int:
    from fleet_tui.core.catalog.query import filter_rows, parse_filter

    cat = _catalog(args)
    conds = parse_filter(args.filter, _ACC_FIELDS, _ACC_ALIASES)
    rows = []
    for a in cat.accelerators.values():
        r = {"id": a.id, "name": a.name, "vendor": a.vendor, "software_stack": a.software_stack,
             "memory": a.memory_gib, "bandwidth": a.memory_bandwidth_gbs,
             **{p: a.peak_tflops.get(p) for p in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")},
             "tdp": a.tdp_w, "interconnect": a.interconnect, "architecture": a.architecture, "year": a.launch_year}
        rows.append((r, a))
    kept = filter_rows([r for r, _ in rows], conds)
    sort: str = args.sort.lower()
    kept, total = _sorted_page(args, kept, _ACC_ALIASES.get(sort, sort), _ACC_FIELDS)
    by_id = {a.id: a for _, a in rows}
    headers = ["id", "vendor", "stack", "mem_GiB", "GB/s", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4",
               "TDP_W"]
    table = [[r["id"], r["vendor"], r["software_stack"], _fmt(r["memory"], 0), _fmt(r["bandwidth"], 0),
              *[_fmt(r[p], 1) for p in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")], _fmt(r["tdp"], 0)]
             for r in kept]
    records = [by_id[r["id"]].model_dump(mode="json") for r in kept]
    if args.csv:
        records = [{k: v for k, v in r.items() if k not in ("notes",)} for r in records]
        for r in records:
            peaks = r.pop("peak_tflops", {}) or {}
            for p in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4"):
                r[f"{p}_tflops"] = peaks.get(p)
    _emit(args, headers, table, records, total)
    return 0


_MODEL_FIELDS = {"id": "text", "name": "text", "family": "text", "layers": "number", "hidden": "number",
                 "intermediate": "number", "heads": "number", "kv_heads": "number", "vocab": "number",
                 "experts": "number", "experts_per_token": "number", "params": "number", "params_b": "number"}


def _params(m) -> float | None:
    pc = getattr(m, "param_count", None)
    try:
        v = pc() if callable(pc) else pc
    except Exception:  # a sizing helper that is still being written must not break listing
        return None
    return float(v) if isinstance(v, (int, float)) else None


def _cmd_models(args: argparse.Namespace) -> int:
    from fleet_tui.core.catalog.query import filter_rows, parse_filter

    cat = _catalog(args)
    conds = parse_filter(args.filter, _MODEL_FIELDS, {"model": "id"})
    rows = []
    for m in cat.models.values():
        params = _params(m)
        # encoder-decoder: both stacks (filter and sort on their sum; shown as "encoder+decoder")
        layers = m.layers + (m.decoder_layers or 0)
        rows.append({"id": m.id, "name": m.name, "family": m.family, "layers": layers,
                     "layers_text": f"{m.layers}+{m.decoder_layers}" if m.decoder_layers else str(m.layers),
                     "hidden": m.hidden,
                     "intermediate": m.intermediate, "heads": m.heads, "kv_heads": m.kv_heads, "vocab": m.vocab,
                     "experts": m.experts, "experts_per_token": m.experts_per_token, "params": params,
                     "params_b": params / 1e9 if params else None})
    kept = filter_rows(rows, conds)
    kept, total = _sorted_page(args, kept, args.sort.lower(), _MODEL_FIELDS)
    headers = ["id", "family", "params_B", "layers", "hidden", "heads", "kv_heads", "vocab", "experts"]
    table = [[r["id"], r["family"], _fmt(r["params_b"], 1), r["layers_text"], r["hidden"], r["heads"], r["kv_heads"],
              r["vocab"], f"{r['experts_per_token']}/{r['experts']}" if r["experts"] else "-"] for r in kept]
    records = [{**cat.models[r["id"]].model_dump(mode="json"), "params": r["params"]} for r in kept]
    _emit(args, headers, table, records, total)
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from fleet_tui.core.catalog import load_catalog, validate_paths

    if args.paths:
        problems, cat = validate_paths(args.paths)
        what = ", ".join(args.paths)
    else:
        cat = load_catalog(getattr(args, "catalog_dir", None) or (), reload=True)
        problems = list(cat.problems)
        what = "bundled + user catalogs" + (" + --catalog-dir" if getattr(args, "catalog_dir", None) else "")
    for p in problems:
        print(p)
    if problems:
        print(f"fleet-tui: {len(problems)} problem(s) in {what}", file=sys.stderr)
        return 2
    flagged = sum(1 for i in cat.instances if i.flags)
    excluded = sum(1 for i in cat.instances if i.excluded)
    print(f"ok: {what}: {len(cat.files)} files, {len(cat.accelerators)} accelerators, {len(cat.models)} models, "
          f"{len(cat.instances)} offers ({flagged} flagged, {excluded} excluded from ranking)")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from fleet_tui.core import paths
    from fleet_tui.core.catalog import load_catalog
    from fleet_tui.core.catalog.importers.skypilot import import_skypilot

    out_dir = args.out_dir or (paths.user_catalog_dir() / "instances")
    cat = load_catalog(getattr(args, "catalog_dir", None) or ())
    reports = import_skypilot(args.files, out_dir=out_dir, cloud=args.cloud, as_of=args.as_of, catalog=cat,
                              replace=args.force)
    for r in reports:
        print(f"{r.out_path}: {r.offers} offers from {r.rows_read} rows ({r.flagged} flagged, "
              f"{r.excluded} excluded)")
        for why, n in sorted(r.rows_skipped.items()):
            print(f"  skipped {n}: {why}")
        for name, n in sorted(r.unresolved.items()):
            print(f"  unresolved accelerator '{name}' in {n} offers (excluded; add it to accelerators.toml)")
    return 0
