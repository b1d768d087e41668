"""Spawning a command that the test will stop with SIGINT (Ctrl-C).

A process started in the background by a non-interactive shell (``cmd &``, ``nohup``, some CI
runners) ignores SIGINT, and an ignored signal is inherited through fork and exec: a child Python
then never raises KeyboardInterrupt, and "stops on Ctrl-C" tests hang until their timeout (seen
under a background ``taskset`` run of the suite). A terminal user's Ctrl-C reaches the command
with the default disposition; ``preexec_fn=default_sigint`` gives the child exactly that.
"""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """Run in the child between fork and exec: SIGINT back to its default action."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
