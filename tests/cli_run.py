"""Running ``fleet-tui`` through its real entry point inside a test (capsys captures the output)."""

from __future__ import annotations

from fleet_tui.cli import main


def run(capsys, *argv):
    """(exit code, stdout, stderr) of ``fleet-tui *argv``."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse refuses a malformed flag value itself (also exit 2)
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err
