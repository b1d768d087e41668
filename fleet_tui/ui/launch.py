"""``fleet-tui`` with no subcommand: check the flags, then open the app.

Everything a user can get wrong on the command line (``--source``, ``--theme``, ``--catalog-dir``,
``--interval``) is checked here, before the terminal switches to the app, so a mistake is a one-line
message and exit status 2 rather than a broken screen.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypedDict

from fleet_tui.core.errors import UserError
from fleet_tui.core.records import record
from fleet_tui.core.redact import redact

if TYPE_CHECKING:  # for the checker only: the app and the sources load once the flags are checked
    from typing_extensions import Unpack

    from fleet_tui.core.monitor.source import Source
    from fleet_tui.ui.app import FleetApp
    from fleet_tui.ui.themes import LoadedTheme


@record
class AppConfig:
    """What the app starts with. The CLI builds it from its flags; tests and scripts build it
    directly. Values are as the user gave them: ``build_app`` checks them."""

    source: str | None = None  # a --source spec; None: auto, and the app opens on the catalog
    instance: str | None = None  # catalog instance type this machine is
    theme: str | None = None  # theme name or alias; None: the default theme
    catalog_dirs: tuple[str | Path, ...] = ()  # extra catalog directories
    interval_s: float | None = None  # monitor refresh; None: 1 s
    record_db: str | Path | None = None  # also record the monitor's samples to this SQLite file
    slurm: bool | None = None  # Jobs pane asks Slurm; None: when squeue is on PATH


class AppOptions(TypedDict, total=False):
    """FleetApp's keyword arguments, as ``build_app`` passes them (tests override some)."""

    source_spec: str | None
    source: Source | None
    instance: str | None
    theme: str
    themes: list[LoadedTheme]
    catalog_dirs: list[Path]
    interval_s: float
    start_mode: str | None
    export_dir: str | Path | None
    record_db: str | Path | None
    slurm: bool | None


def build_app(config: AppConfig, **overrides: Unpack[AppOptions]) -> FleetApp:
    """The configured app for ``config`` (raises UserError for bad values). Used by tests and
    scripts; ``overrides`` replace FleetApp's keyword arguments."""
    from fleet_tui.ui.themes import load_themes, resolve_theme_name

    interval = 1.0
    if config.interval_s is not None:  # the default needs no check (and no engine import)
        from fleet_tui.core.monitor.engine import MIN_INTERVAL_S

        interval = config.interval_s
        if not interval >= MIN_INTERVAL_S:  # also rejects NaN
            raise UserError(f"--interval {interval:g}: must be at least {MIN_INTERVAL_S} seconds.")
    catalog_dirs = [Path(d).expanduser() for d in config.catalog_dirs]
    for directory in catalog_dirs:
        if not directory.is_dir():
            raise UserError(f"--catalog-dir {str(directory)!r}: not a directory (it should hold "
                            "catalog TOML files such as instances/*.toml).")
    themes = load_themes()
    theme = resolve_theme_name(config.theme, themes)

    explicit = config.source
    source = make_source(explicit or "auto", interval)

    from fleet_tui.ui.app import FleetApp

    record = config.record_db
    record_db = Path(record).expanduser() if record else None
    if record_db is not None and not record_db.parent.is_dir():
        raise UserError(f"--record {str(record)!r}: folder {str(record_db.parent)!r} does not exist.")
    if record_db is not None:  # a database that cannot be written is refused before the app opens
        _check_record_db(record_db, str(record))
    options = AppOptions(source_spec=explicit or "auto", source=source, record_db=record_db,
                         instance=config.instance, theme=theme, themes=themes,
                         catalog_dirs=catalog_dirs, interval_s=interval, slurm=config.slurm,
                         start_mode=("fleet" if source.kind == "fleet" else "monitor")
                         if explicit else "catalog")
    options.update(overrides)
    return FleetApp(**options)


def _check_record_db(path: Path, shown: str) -> None:
    """Open ``--record``'s database as the recorder will: a folder that cannot be written, a
    directory or a file that is not SQLite ends the start with the flag's name, rather than the
    app opening on NO DEVICE with a notice."""
    import sqlite3

    from fleet_tui.core.monitor.recorder import connect

    try:
        connect(path).close()
    except (UserError, OSError, sqlite3.Error) as exc:
        # the recorder names its own flag (--db PATH: reason): keep the reason, name ours
        reason = str(exc).partition(": ")[2] if isinstance(exc, UserError) else str(exc)
        raise UserError(f"--record {shown!r}: {reason or exc}") from None


def make_source(spec: str, interval_s: float) -> Source:
    """The unopened core Source for ``spec``; UserError for a spec that cannot work."""
    from fleet_tui.core.monitor.sources import SOURCES, open_source, parse_source_spec

    parsed = parse_source_spec(spec)  # a malformed spec is a UserError before anything opens
    if SOURCES[parsed.kind].probe is not None:
        # Asked for one local backend by name (one auto would probe): find out now, not inside
        # the app, if it cannot run.
        try:
            asyncio.run(_probe(open_source(spec)))
        except UserError as exc:
            text = str(exc)
            raise UserError(redact(text if text.startswith("--source")
                                  else f"--source {spec}: {text}")) from None
    if parsed.kind == "sim":  # simulated time runs at the monitor's interval, as in `monitor`
        return open_source(spec, interval_s=interval_s)
    return open_source(spec)


async def _probe(source: Source) -> None:
    try:
        await source.open()
    finally:
        await source.close()


NO_TERMINAL = ("the app needs a terminal, and {which} not one (a script, cron or CI step?); "
               "the headless commands work without one: 'fleet-tui monitor --once', "
               "'fleet-tui size ...', 'fleet-tui recommend ...' ('fleet-tui --help' lists them all).")


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed, or not a real file
        return False


def check_terminal(stdin: TextIO | None, stdout: TextIO | None) -> None:
    """UserError unless both ``stdin`` and ``stdout`` are terminals: without one the app has no
    keys to read or no screen to draw on, and would wait forever."""
    missing = [name for name, stream in (("stdin", stdin), ("stdout", stdout))
               if not _is_terminal(stream)]
    if missing:
        which = " and ".join(missing) + (" are" if len(missing) > 1 else " is")
        raise UserError(NO_TERMINAL.format(which=which))


def run_app(config: AppConfig) -> int:
    app = build_app(config)  # a bad flag is named first, terminal or not
    check_terminal(sys.stdin, sys.stdout)  # before the app runs: exit 2 at once, never spin
    app.run()
    return int(app.return_code or 0)
