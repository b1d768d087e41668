"""``fleet-tui scenarios list | run ID | run-set NAME [--json|--markdown]``.

The named scenarios of ``catalogs/workloads.toml`` (the GPU migration analyzer's): each runs the
recommendation engine from its current setup and prints the migration report. JSON keys are
documented in :mod:`fleet_tui.core.scenarios` (``ScenarioResult.to_dict`` / ``SetResult.to_dict``);
``list --json`` gives ``{"scenarios": [{"id", "title", "kind", "model", "current_instance",
"current_count", "tags", "description"}], "sets": [{"id", "title", "description", "scenarios"}]}``.
"""

from __future__ import annotations

import argparse
import sys

from fleet_tui.commands._numbers import whole_number


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scenarios", help="named workload scenarios and their migration reports",
        description="Named scenarios (catalogs/workloads.toml): a workload and the setup it runs on "
                    "today; `run` ranks the alternatives and prints the migration report.",
    )
    sub = p.add_subparsers(dest="scenarios_command", metavar="ACTION")
    sub.required = True

    def common(sp: argparse.ArgumentParser) -> None:
        fmt = sp.add_mutually_exclusive_group()
        fmt.add_argument("--json", action="store_true", help="JSON on stdout")
        fmt.add_argument("--markdown", action="store_true", help="Markdown tables")
        sp.add_argument("--catalog-dir", action="append", default=[], metavar="DIR",
                        dest="scenario_catalog_dirs",
                        help="extra catalog directory (its workloads.toml adds scenarios)")

    ls = sub.add_parser("list", help="list scenarios and sets")
    common(ls)
    ls.set_defaults(func=_list)
    run = sub.add_parser("run", help="run one scenario")
    run.add_argument("id", metavar="ID")
    run.add_argument("--top", type=whole_number, default=5, metavar="K", help="alternatives shown (default 5)")
    common(run)
    run.set_defaults(func=_run)
    rs = sub.add_parser("run-set", help="run every scenario of a set")
    rs.add_argument("name", metavar="NAME")
    rs.add_argument("--top", type=whole_number, default=3, metavar="K",
                    help="alternatives shown per scenario (default 3)")
    common(rs)
    rs.set_defaults(func=_run_set)


def _load(args):
    from fleet_tui.commands._catalog_args import load_user_catalog
    from fleet_tui.core.scenarios import load_scenarios

    dirs = list(getattr(args, "catalog_dir", []) or []) + list(args.scenario_catalog_dirs or [])
    catalog = load_user_catalog(dirs)
    scenarios = load_scenarios(catalog, extra_dirs=dirs)
    for line in scenarios.problems:
        print(f"fleet-tui: warning: {line}", file=sys.stderr)
    return catalog, scenarios


def _check_top(top: int) -> None:
    from fleet_tui.core.errors import UserError

    if top < 1:
        raise UserError(f"--top must be >= 1, got {top}")


def _list(args) -> int:
    from fleet_tui.commands._output import print_json, print_table

    _catalog, sc = _load(args)
    scen = [{"id": s.id, "title": s.title, "kind": s.kind, "model": s.model,
             "current_instance": s.current_instance, "current_count": s.current_count,
             "tags": list(s.tags), "description": s.description} for s in sc.scenarios.values()]
    sets = [{"id": s.id, "title": s.title, "description": s.description,
             "scenarios": list(s.scenarios)} for s in sc.sets.values()]
    if args.json:
        print_json({"scenarios": scen, "sets": sets})
        return 0
    rows = [(s["id"], s["kind"], s["model"], f"{s['current_count']}× {s['current_instance']}",
             s["title"]) for s in scen]
    set_rows = [(s["id"], len(s["scenarios"]), s["description"]) for s in sets]
    if args.markdown:
        from fleet_tui.core.ranking.export import markdown_table

        print("## Scenarios\n")
        print(markdown_table(("id", "kind", "model", "current", "title"), rows))
        print("\n## Sets\n")
        print(markdown_table(("set", "scenarios", "description"), set_rows))
        return 0
    print_table(("SCENARIO", "KIND", "MODEL", "CURRENT", "TITLE"), rows)
    print()
    print_table(("SET", "N", "DESCRIPTION"), set_rows)
    return 0


def _run(args) -> int:
    from fleet_tui.commands._output import print_json
    from fleet_tui.core.scenarios import run_spec

    _check_top(args.top)
    catalog, sc = _load(args)
    result = run_spec(sc.scenario(args.id), catalog, top=args.top)
    if args.json:
        print_json(result.to_dict())
    else:
        sys.stdout.write(render_result(result, markdown=args.markdown))
    return 0


def _run_set(args) -> int:
    from fleet_tui.commands._output import print_json
    from fleet_tui.core.scenarios import SetResult, run_spec

    _check_top(args.top)
    catalog, sc = _load(args)
    spec = sc.set(args.name)
    result = SetResult(spec=spec, results=tuple(run_spec(sc.scenario(i), catalog, top=args.top)
                                                for i in spec.scenarios))
    if args.json:
        print_json(result.to_dict())
        return 0
    out = []
    md = args.markdown
    out.append(f"# {spec.title or spec.id}\n\n{spec.description}\n\n" if md
               else f"{spec.title or spec.id}: {spec.description}\n\n")
    for r in result.results:
        out.append(render_result(r, markdown=md, heading_level=2))
        out.append("\n")
    out.append(_render_summary(result, markdown=md))
    sys.stdout.write("".join(out))
    return 0


def _render_summary(result, *, markdown: bool) -> str:
    from fleet_tui.commands._output import format_table
    from fleet_tui.core.ranking import money
    from fleet_tui.core.ranking.export import markdown_table

    rows = []
    for r in result.results:
        cur, best, mig = r.current, r.best, r.migration
        rows.append((
            r.spec.id,
            f"{cur.instances}× {cur.instance_type}" if cur else "-",
            money(cur.usd_per_month) if cur else "-",
            "yes" if cur and cur.fits else "NO",
            best.label if best else "nothing fits",
            money(cur.usd_per_month - mig.savings_usd_per_month)
            if mig and mig.savings_usd_per_month is not None and cur else "-",
            f"{mig.savings_pct:.0f}%" if mig and mig.savings_pct is not None else "-",
            mig.complexity if mig else "-",
        ))
    # "$/month after": what the current monthly amount of work costs on the best offer
    headers = ("scenario", "current", "$/month now", "fits", "best", "$/month after", "savings",
               "complexity")
    s = result.summary()
    total = (f"Total for the scenarios that can be compared: {money(s['current_usd_per_month'])}"
             f"/month now, {money(s['best_usd_per_month'])}/month after switching"
             + (f" ({s['savings_pct']:.0f}% less)" if s["savings_pct"] is not None else "") + ".")
    if markdown:
        return "## Summary\n\n" + markdown_table(headers, rows) + "\n\n" + total + "\n"
    return "Summary\n" + format_table([h.upper() for h in headers], rows) + "\n" + total + "\n"


def render_result(result, *, markdown: bool = False, heading_level: int = 1) -> str:
    """Readable migration report for one scenario (text or Markdown)."""
    from fleet_tui.commands.recommend import render_recommendation

    s = result.spec
    mig = result.migration
    h = "#" * heading_level
    lines = []
    if markdown:
        lines.append(f"{h} {s.id}: {s.title}\n\n{s.description}\n")
    else:
        lines.append(f"== {s.id}: {s.title}")
        lines.append(s.description)
    lines.append(render_recommendation(result.recommendation, markdown=markdown,
                                       explain_lines=result.explanation).rstrip("\n"))
    if mig is not None:
        rep = [
            ("savings", f"{_money_or_na(mig.savings_usd_per_month)}/month"
             + (f" ({mig.savings_pct:.0f}%)" if mig.savings_pct is not None else "")
             if mig.savings_usd_per_month is not None else
             "n/a: the current setup cannot run this workload" if not mig.current.fits
             else f"n/a: speed unknown ({_unknown_speed(mig)})" if _unknown_speed(mig)
             else "n/a"),
            ("performance", f"{mig.speedup:.2f}× throughput" if mig.speedup else
             f"n/a: speed unknown ({_unknown_speed(mig)})" if _unknown_speed(mig) else "n/a"),
            ("memory", mig.memory_check),
            ("risk", "; ".join(mig.risks) or "none named"),
            ("complexity", f"{mig.complexity} ({'; '.join(mig.complexity_reasons)})"),
        ]
        if markdown:
            lines.append(f"\n{h}# Migration to {mig.target.label}\n")
            lines.extend(f"- **{k}**: {v}" for k, v in rep)
        else:
            lines.append(f"\nMigration to {mig.target.label}:")
            lines.extend(f"  {k:<12} {v}" for k, v in rep)
    return "\n".join(lines) + "\n"


def _unknown_speed(mig) -> str:
    """Why the current or target speed is unknown ("" when both are known)."""
    return "; ".join(o.speed_unknown_reason for o in (mig.current, mig.target)
                     if getattr(o, "speed_unknown", False) and o.speed_unknown_reason)


def _money_or_na(x):
    from fleet_tui.core.ranking import money

    return money(x)
