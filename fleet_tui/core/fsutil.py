"""Files written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


@contextmanager
def atomic_writer(path: Path | str, *, mode: int = 0o644) -> Iterator[TextIO]:
    """A text handle on a temp file in ``path``'s directory that replaces ``path`` (``os.replace``)
    when the block ends normally and is removed when it raises, so a reader (or a crash) never sees
    a half-written file. For output written in pieces (a recording of many snapshots)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path: Path | str, text: str, *, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` whole or not at all (see ``atomic_writer``)."""
    with atomic_writer(path, mode=mode) as handle:
        handle.write(text)
