"""``fleet-tui`` with no subcommand: check the flags, then open the app.

Everything a user can get wrong on the command line (``--source``, ``--theme``, ``--catalog-dir``,
``--interval``) is checked here, before the terminal switches to the app, so a mistake is a one-line
message and exit status 2 rather than a broken screen.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from fleet_tui.core.errors import UserError

MIN_INTERVAL_S = 0.25


def build_app(args: argparse.Namespace, **overrides):
    """The configured app for ``args`` (raises UserError for bad flags). Used by tests and scripts."""
    from fleet_tui.ui.themes import load_themes, resolve_theme_name

    interval = args.interval if getattr(args, "interval", None) is not None else 1.0
    if not interval >= MIN_INTERVAL_S:  # also rejects NaN
        raise UserError(f"--interval {interval:g}: must be at least {MIN_INTERVAL_S} seconds.")
    catalog_dirs = [Path(d).expanduser() for d in (getattr(args, "catalog_dir", None) or [])]
    for directory in catalog_dirs:
        if not directory.is_dir():
            raise UserError(f"--catalog-dir {str(directory)!r}: not a directory (it should hold "
                            "catalog TOML files such as instances/*.toml).")
    themes = load_themes()
    theme = resolve_theme_name(getattr(args, "theme", None), themes)

    explicit = getattr(args, "source", None)
    source = make_source(explicit or "auto", interval)

    from fleet_tui.ui.app import FleetApp

    record = getattr(args, "record", None)
    record_db = Path(record).expanduser() if record else None
    if record_db is not None and not record_db.parent.is_dir():
        raise UserError(f"--record {record!r}: folder {str(record_db.parent)!r} does not exist.")
    options = dict(source_spec=explicit or "auto", source=source, record_db=record_db,
                   instance=getattr(args, "instance", None), theme=theme, themes=themes,
                   catalog_dirs=catalog_dirs, interval_s=interval,
                   start_mode=("fleet" if getattr(source, "kind", "") == "fleet" else "monitor")
                   if explicit else "catalog")
    options.update(overrides)
    return FleetApp(**options)


def make_source(spec: str, interval_s: float):
    """The unopened core Source for ``spec``; UserError for a spec that cannot work."""
    from fleet_tui.core.monitor.sources import open_source, parse_source_spec

    parsed = parse_source_spec(spec)  # a malformed spec is a UserError before anything opens
    if parsed.kind in ("nvml", "hpu", "neuron"):
        # Asked for one backend by name: find out now, not inside the app, if it cannot run.
        try:
            asyncio.run(_probe(open_source(spec)))
        except UserError as exc:
            text = str(exc)
            raise UserError(text if text.startswith("--source") else f"--source {spec}: {text}") from None
    return open_source(spec)


async def _probe(source) -> None:
    try:
        await source.open()
    finally:
        await source.close()


def run_app(args: argparse.Namespace) -> int:
    app = build_app(args)
    app.run()
    return int(app.return_code or 0)
