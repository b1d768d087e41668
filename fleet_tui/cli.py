"""Command-line entry point.

``fleet-tui`` with no subcommand opens the Textual app; subcommands are headless and print tables or
JSON. Contract: exit 0 ok, 2 bad input (a ``UserError``, or an OSError/UnicodeError/RecursionError/
OverflowError/sqlite error that input caused: message, no traceback), 1 internal error (a
traceback, secrets masked, and how to report it), 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.

Start-up stays light: each command module registers its flags without importing the engine, and
imports what it needs inside its handler, so ``--help`` and ``--version`` never import Textual or
pydantic. A run registers only the command modules its arguments name (all of them for ``--help``,
the app or a mistyped command), and the ``--source`` help text (the source registry) is built only
when help can be shown: ``size … --json`` must stay within 8x ``python -c pass``
(bench/bench_catalog.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from fleet_tui import __version__
from fleet_tui.commands._numbers import finite_float

# Each module defines ``register(subparsers)`` for the commands listed with it (a test checks the
# lists); handlers are ``func(args) -> int`` set via ``set_defaults(func=...)``.
COMMANDS: dict[str, tuple[str, ...]] = {
    "fleet_tui.commands.catalog": ("catalog",),
    "fleet_tui.commands.size": ("size",),
    "fleet_tui.commands.recommend": ("recommend",),
    "fleet_tui.commands.scenarios": ("scenarios",),
    "fleet_tui.commands.monitor": ("monitor", "analyze", "record", "rightsize"),
    "fleet_tui.commands.fleet": ("fleet", "export"),
    "fleet_tui.commands.jobs": ("jobs",),
    "fleet_tui.commands.queue": ("queue",),
    "fleet_tui.commands.plan": ("plan",),
}
COMMAND_MODULES = tuple(COMMANDS)
_HELP_FLAGS = ("-h", "--help")


def add_app_args(parser: argparse.ArgumentParser, *, full_help: bool = True) -> None:
    """Flags of the interactive app (also accepted before a subcommand). ``full_help=False``: the
    ``--source`` help is left short (the caller knows no help will be printed)."""
    if full_help:
        from fleet_tui.core.monitor.sources import source_help  # the registry; imports no backend

        source_text = source_help()
    else:
        source_text = "where live readings come from (see --help)"
    parser.add_argument("--source", default=None, help=source_text)
    parser.add_argument("--instance", default=None,
                        help="catalog instance type this machine is (for cost of idle time), "
                             "e.g. p5.48xlarge")
    parser.add_argument("--theme", default=None, help="theme name (see themes/*.toml)")
    parser.add_argument("--catalog-dir", action="append", default=[], metavar="DIR",
                        help="extra catalog directory; overrides bundled entries with the same id "
                             "(repeatable)")
    parser.add_argument("--interval", type=finite_float, default=None, metavar="SECONDS",
                        help="monitor refresh interval in seconds (>= 0.25, default 1)")
    parser.add_argument("--slurm", action="store_true", default=None,
                        help="app: the Jobs pane also asks Slurm (squeue/sinfo --json) which job "
                             "holds which GPU and what waits (default: when squeue is on PATH)")
    parser.add_argument("--record", default=None, metavar="DB",
                        help="app: also record the monitor's samples to this SQLite history "
                             "database (as 'fleet-tui record'; 'fleet-tui rightsize --db DB' reads it)")


def _modules_for(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[str, ...]:
    """The command modules a run with ``argv`` needs: those whose commands it names; none when it
    has only top-level flags (the app, ``--version``); every one for help or a mistyped command
    (its error lists the choices)."""
    if any(a in _HELP_FLAGS for a in argv):
        return COMMAND_MODULES
    words = set(argv)
    named = tuple(m for m, names in COMMANDS.items() if words.intersection(names))
    if named:
        return named
    takes_value = {opt for action in parser._actions if action.nargs is None for opt in action.option_strings}
    after_flag = False
    for word in argv:
        if after_flag:
            after_flag = False
        elif word.startswith("-"):
            after_flag = word in takes_value
        else:
            return COMMAND_MODULES  # a word that is no command: let argparse list the choices
    return ()


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` reads it ($COLUMNS, then stdout's
    terminal, else 80), without importing shutil."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    stdout = sys.__stdout__  # None under pythonw, or closed
    if columns <= 0 and stdout is not None:
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class _Parser(argparse.ArgumentParser):
    """argparse's parser with the help width given to its formatter: argparse builds a formatter
    for every ``add_argument`` (to check the metavar), and one without a width imports shutil,
    and shutil bz2, lzma and zlib: ~2.5 ms of every command's start (``size --json``).
    Subparsers are of the parent's class, so every command's parser is one of these.

    No abbreviated flags: argparse takes any unique prefix of a long flag, so ``recommend --tokens
    20B`` (a flag of ``size``) was read as ``--tokens-per-s 20B`` and refused under that name. A
    prefix that one command takes and another does not, or that a new flag makes ambiguous later,
    is not a name to rely on; an unknown flag is now named as the user typed it."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def _get_formatter(self) -> argparse.HelpFormatter:
        formatter = self.formatter_class
        if isinstance(formatter, type) and issubclass(formatter, argparse.HelpFormatter):
            return formatter(prog=self.prog, width=_columns() - 2)
        return super()._get_formatter()  # a formatter that takes no width

    def error(self, message: str) -> NoReturn:
        """argparse's error (usage, message, exit 2) with secrets and control characters of the
        words it quotes masked (``--days 'prometheus:http://u:pw@h'`` is not a number)."""
        from fleet_tui.core.redact import redact
        from fleet_tui.core.textsafe import clean_lines

        super().error(clean_lines(redact(message)))


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given the arguments of one run, only what that run needs
    (see the module docstring)."""
    parser = _Parser(
        prog="fleet-tui",
        description="GPU/accelerator fleets in the terminal: catalog, workload sizing, live monitor "
                    "with bottleneck diagnosis, recommendations. Without a command, opens the app.",
        epilog="Every input is bounded (numbers within ±1e12, files read up to a stated size, "
               "timestamps within ±1e10 s): docs/hostile-input.md lists the bounds.",
    )
    parser.add_argument("--version", action="version", version=f"fleet-tui {__version__}")
    add_app_args(parser, full_help=argv is None or any(a in _HELP_FLAGS for a in argv))
    modules = COMMAND_MODULES if argv is None else _modules_for(parser, argv)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def app_config(args: argparse.Namespace):
    """The app's flags as the UI's ``AppConfig`` (the Namespace stops here)."""
    from fleet_tui.ui.launch import AppConfig  # launch.py imports Textual only when building

    return AppConfig(source=args.source, instance=args.instance, theme=args.theme,
                     catalog_dirs=tuple(args.catalog_dir or ()), interval_s=args.interval,
                     record_db=args.record, slurm=args.slurm)


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


def _print_error(text: str) -> None:
    from fleet_tui.core.redact import redact  # only on an error: it imports urllib (~3 ms)
    from fleet_tui.core.textsafe import clean_lines

    print(f"fleet-tui: error: {clean_lines(redact(text))}", file=sys.stderr)


def _refuse_unknown(parser: argparse.ArgumentParser, args: argparse.Namespace,
                    extra: Sequence[str]) -> NoReturn:
    """Exit 2 naming the words no parser took, through the parser of the command they followed
    (its usage, not the top level's), with the nearest flag that command has for each mistyped
    one: ``size --batchsize 3`` -> "unrecognized arguments: --batchsize 3 (--batchsize: did you
    mean --batch?)". argparse's own ``parse_args`` reports them from the top-level parser."""
    import difflib  # only on a mistake

    from fleet_tui.core.redact import redact_words

    target: argparse.ArgumentParser = parser
    deeper = True
    while deeper:  # down the commands the words named: "catalog instances" is two
        deeper = False
        for action in target._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, None) or "")
                if chosen is not None:
                    target, deeper = chosen, True
                    break
    flags = {opt[2:]: opt for action in target._actions for opt in action.option_strings
             if opt.startswith("--")}
    hints = []
    for word in extra:
        name = word.split("=", 1)[0]
        if name.startswith("--") and name[2:] not in flags:
            typed = name[2:]
            near = difflib.get_close_matches(typed, list(flags), n=2, cutoff=0.6)
            if len(typed) >= 3:  # and the flags it is a part of: --tokens -> --training-tokens
                near += [f for f in flags if typed in f.split("-") and f not in near][:3 - len(near)]
            if near:
                hints.append(f"{name}: did you mean {' or '.join(flags[n] for n in near)}?")
    text = "unrecognized arguments: " + " ".join(redact_words(list(extra)))
    if hints:
        text += " (" + "; ".join(hints) + ")"
    target.error(f"{text}; '{target.prog} --help' lists what it takes")
    raise AssertionError("unreachable: ArgumentParser.error exits")  # pyright sees no exit in the loop's parser


class Signalled(BaseException):
    """SIGTERM or SIGHUP arrived: unwinds the stack like Ctrl-C (``finally`` blocks and context
    managers clean up: the recorder commits, temp files go), then the exit status is 128 + the
    signal's number (143, 129), as a shell reports a process the signal ended."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, _frame: object) -> None:
    raise Signalled(signum)


def install_signal_handlers() -> None:
    """SIGTERM/SIGHUP raise ``Signalled`` in the main thread (see its docstring)."""
    import signal

    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None:
            try:
                signal.signal(signum, _on_signal)
            except (ValueError, OSError):  # not the main thread (a test calling main): leave it
                pass


_REPORT = ("this is a bug in fleet-tui, not in your input: please report it with the command "
           "line (secrets masked above) and the traceback")


def _cause(exc: BaseException) -> str | None:
    """The user-facing sentence for an exception that a user's input (a path, a file's bytes, a
    number, a nesting) caused, or ``None`` for a bug. One mapping for every command."""
    if isinstance(exc, OSError):
        import errno

        name = exc.filename if exc.filename is not None else ""
        why = exc.strerror or str(exc)
        if exc.errno == errno.ENAMETOOLONG:
            why = "a name in this path is over 255 bytes (the file system's limit)"
        shown = str(name)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        return f"{shown}: {why}" if shown else why
    if isinstance(exc, UnicodeError):
        return f"an input is not UTF-8 text ({exc.__class__.__name__}: {str(exc)[:200]})"
    if isinstance(exc, RecursionError):
        return "an input is nested too deeply to read (a JSON or TOML document, or a catalog)"
    if isinstance(exc, OverflowError):
        return f"a number in the input is too large to use ({str(exc)[:200]})"
    if type(exc).__module__ == "sqlite3":  # sqlite3.Error and its subclasses, without importing it
        return f"a history database cannot be used: {exc}"
    if isinstance(exc, RuntimeError) and "Symlink loop" in str(exc):  # pathlib before 3.13
        return f"{str(exc)[:300]}: a symbolic link points back to itself"
    if isinstance(exc, ValueError) and "null byte" in str(exc):
        return "a path or value holds a NUL byte"
    return None


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    secret = any("@" in w or "?" in w or "//" in w for w in words)
    if secret:
        from fleet_tui.core.redact import remember_words  # a secret may be in them: mask it

        remember_words(words)
    parser = build_parser(words)
    args, extra = parser.parse_known_args(words)
    if extra:
        _refuse_unknown(parser, args, extra)
    func = getattr(args, "func", None) or _run_app
    if argv is None:
        install_signal_handlers()
    streams = sys.stdout, sys.stderr
    if func is not _run_app:  # the app writes its own escape codes; a command's text is data
        from fleet_tui.core.textsafe import SafeStream

        sys.stdout, sys.stderr = (SafeStream(sys.stdout, masks=secret),
                                  SafeStream(sys.stderr, masks=secret))
    try:
        return _dispatch(parser, argv, func, args)
    finally:
        if sys.stdout is not streams[0]:
            try:
                sys.stdout.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more to say
                pass
        sys.stdout, sys.stderr = streams


def _dispatch(parser: argparse.ArgumentParser, argv: list[str] | None, func, args) -> int:
    """``func(args)`` with the one mapping of errors to exit statuses (module doc)."""
    from fleet_tui.core.errors import FieldError, UserError

    try:
        return int(func(args) or 0)
    except FieldError as exc:
        labels = flag_labels(parser, argv)
        text = exc.render(lambda field: labels.get(field, "--" + field.replace("_", "-")))
        _print_error(text)
        return 2
    except UserError as exc:
        _print_error(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    except Signalled as exc:
        return 128 + exc.signum
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place that tells a user's mistake from a bug
        cause = _cause(exc)
        if cause is not None:
            _print_error(cause)
            return 2
        import traceback

        from fleet_tui.core.redact import redact

        print(redact("".join(traceback.format_exception(exc))), file=sys.stderr, end="")
        print(f"fleet-tui: {_REPORT}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
