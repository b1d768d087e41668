"""Command-line entry point.

``fleet-tui`` with no subcommand opens the Textual app; subcommands are headless and print tables or
JSON. Contract: exit 0 ok, 2 bad input (a ``UserError``: message, no traceback), 1 internal error.

Start-up stays light: each command module registers its flags without importing the engine, and
imports what it needs inside its handler, so ``--help`` and ``--version`` never import Textual or
pydantic.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from fleet_tui import __version__
from fleet_tui.commands._numbers import finite_float

# Each module defines ``register(subparsers)``; handlers are ``func(args) -> int`` set via
# ``set_defaults(func=...)``.
COMMAND_MODULES = (
    "fleet_tui.commands.catalog",
    "fleet_tui.commands.size",
    "fleet_tui.commands.recommend",
    "fleet_tui.commands.scenarios",
    "fleet_tui.commands.monitor",
    "fleet_tui.commands.fleet",
    "fleet_tui.commands.jobs",
    "fleet_tui.commands.queue",
    "fleet_tui.commands.plan",
)


def add_app_args(parser: argparse.ArgumentParser) -> None:
    """Flags of the interactive app (also accepted before a subcommand)."""
    from fleet_tui.core.monitor.sources import source_help  # the registry; imports no backend

    parser.add_argument("--source", default=None, help=source_help())
    parser.add_argument("--instance", default=None,
                        help="catalog instance type this machine is (for cost of idle time), "
                             "e.g. p5.48xlarge")
    parser.add_argument("--theme", default=None, help="theme name (see themes/*.toml)")
    parser.add_argument("--catalog-dir", action="append", default=[], metavar="DIR",
                        help="extra catalog directory; overrides bundled entries with the same id "
                             "(repeatable)")
    parser.add_argument("--interval", type=finite_float, default=None, metavar="SECONDS",
                        help="monitor refresh interval in seconds (>= 0.25, default 1)")
    parser.add_argument("--record", default=None, metavar="DB",
                        help="app: also record the monitor's samples to this SQLite history "
                             "database (as 'fleet-tui record'; 'fleet-tui rightsize --db DB' reads it)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleet-tui",
        description="GPU/accelerator fleets in the terminal: catalog, workload sizing, live monitor "
                    "with bottleneck diagnosis, recommendations. Without a command, opens the app.",
    )
    parser.add_argument("--version", action="version", version=f"fleet-tui {__version__}")
    add_app_args(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def app_config(args: argparse.Namespace):
    """The app's flags as the UI's ``AppConfig`` (the Namespace stops here)."""
    from fleet_tui.ui.launch import AppConfig  # launch.py imports Textual only when building

    return AppConfig(source=args.source, instance=args.instance, theme=args.theme,
                     catalog_dirs=tuple(args.catalog_dir or ()), interval_s=args.interval,
                     record_db=args.record)


def _run_app(args: argparse.Namespace) -> int:
    from fleet_tui.ui.launch import run_app  # imported last: Textual is heavy

    return run_app(app_config(args))


def flag_labels(parser: argparse.ArgumentParser, argv: list[str] | None) -> dict[str, str]:
    """Core field name -> the flag that sets it, for the parser and the subcommand in ``argv``:
    a field is an argparse ``dest``, so ``FieldError("batch", ...)`` reads ``--batch``."""
    labels: dict[str, str] = {}
    parsers = [parser]
    for action in parser._actions:  # the subcommand's own parser, when one was chosen
        if isinstance(action, argparse._SubParsersAction):
            words = argv if argv is not None else sys.argv[1:]
            parsers += [sub for name, sub in action.choices.items() if name in words]
    for p in parsers:
        for action in p._actions:
            longest = max(action.option_strings, key=len, default=None)
            if longest and longest.startswith("--"):
                labels.setdefault(action.dest, longest)
    return labels


def main(argv: list[str] | None = None) -> int:
    from fleet_tui.core.errors import FieldError, UserError
    from fleet_tui.core.redact import redact

    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None) or _run_app
    try:
        return int(func(args) or 0)
    except FieldError as exc:
        labels = flag_labels(parser, argv)
        text = exc.render(lambda field: labels.get(field, "--" + field.replace("_", "-")))
        print(f"fleet-tui: error: {redact(text)}", file=sys.stderr)
        return 2
    except UserError as exc:
        print(f"fleet-tui: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
