"""Files written whole or not at all, durable once written, and never clobbered by surprise.

* The text goes to a temp file beside the target, which is ``fsync``-ed, then renamed over the
  target (``os.replace``), then the directory is ``fsync``-ed: a reader (or a crash, or a power
  loss) sees the old file or the new one, never half of one.
* The temp file is created with mode 0666 and the kernel applies the process umask, so a written
  file gets the mode the user's umask says (0644 under the usual 022, 0600 under 077), like any
  other program's output; ``mode=`` sets one explicitly instead.
* ``replace=False`` refuses to replace an existing file (``FileExistsError``): the temp file is
  hard-linked to the target name, which fails if the name exists, so even a file created between a
  check and the write is not overwritten. Front ends turn that into "exists; pass --force".
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    for _ in range(100):
        tmp = directory / f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            # 0o666 & ~umask: the mode any program's new file gets (mkstemp would force 0600)
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                           0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(directory))


def fsync_dir(directory: Path | str) -> None:
    """Make a rename or a new name in ``directory`` durable (best effort: some file systems and
    platforms cannot open or sync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _install(tmp: Path, path: Path, replace: bool) -> None:
    if replace:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # fails with FileExistsError if the name is taken: no check-then-write race
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "file exists", str(path)) from None
    except OSError:  # a file system without hard links: check, then rename
        if path.exists():
            raise FileExistsError(errno.EEXIST, "file exists", str(path)) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


@contextmanager
def atomic_writer(path: Path | str, *, mode: int | None = None,
                  replace: bool = True) -> Iterator[TextIO]:
    """A text handle on a temp file in ``path``'s directory that replaces ``path`` when the block
    ends normally and is removed when it raises (see the module docstring). For output written in
    pieces (a recording of many snapshots). ``mode=None``: the umask decides."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not replace and path.exists():  # fail before the caller does the work of writing
        raise FileExistsError(errno.EEXIST, "file exists", str(path))
    fd, tmp = _create_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        _install(tmp, path, replace)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)


def write_atomic(path: Path | str, text: str, *, mode: int | None = None, replace: bool = True) -> None:
    """Write ``text`` to ``path`` whole or not at all (see ``atomic_writer``)."""
    with atomic_writer(path, mode=mode, replace=replace) as handle:
        handle.write(text)
