"""Flags the fleet commands share (``fleet``, ``export``, ``jobs``)."""

from __future__ import annotations

import argparse

MAX_DEVICES = 10**9


def device_count(text: str) -> int:
    """A device count 0-``MAX_DEVICES`` (``--aggregate-above``)."""
    value = int(text) if text.isdigit() and len(text) <= 10 else None
    if value is None or value > MAX_DEVICES:
        shown = repr(text) if len(text) <= 80 else f"a {len(text)}-character value"
        raise argparse.ArgumentTypeError(f"{shown}: must be a whole number of devices "
                                         f"0-{MAX_DEVICES:g}")
    return value


def aggregate_flag(p: argparse.ArgumentParser) -> None:
    """``--aggregate-above N`` (fleet, export, jobs)."""
    p.add_argument("--aggregate-above", type=device_count, default=None, metavar="DEVICES",
                   help="past this many DCGM GPUs, read the fleet as roll-ups computed by "
                        "Prometheus (per node, per job, the least-used devices) instead of every "
                        "device (default 4096, or FLEET_TUI_AGGREGATE_ABOVE; 0 = always)")


def aggregate_above(args: argparse.Namespace) -> int | None:
    """The ``--aggregate-above`` value (None: the source's default)."""
    return getattr(args, "aggregate_above", None)
