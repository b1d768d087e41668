"""Files written whole or not at all, durable once written, and never clobbered by surprise.

* The text goes to a temp file beside the target, which is ``fsync``-ed, then renamed over the
  target (``os.replace``), then the directory is ``fsync``-ed: a reader (or a crash, or a power
  loss) sees the old file or the new one, never half of one.
* The temp file is created with mode 0666 and the kernel applies the process umask, so a new
  file gets the mode the user's umask says (0644 under the usual 022, 0600 under 077), like any
  other program's output; a file replaced keeps its own mode (a 0600 report stays 0600);
  ``mode=`` sets one explicitly instead.
* Input files are read through ``read_bytes_capped``/``read_text_capped``/``iter_lines_capped``:
  regular files only (a FIFO or ``/dev/zero`` would never end), at most the ``core.limits`` bound.
* ``replace=False`` refuses to replace an existing file (``FileExistsError``): the temp file is
  hard-linked to the target name, which fails if the name exists, so even a file created between a
  check and the write is not overwritten. Front ends turn that into "exists; pass --force".
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

from fleet_tui.core.errors import UserError
from fleet_tui.core.limits import int_limit


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    for _ in range(100):
        tmp = directory / f".{name}.{os.urandom(4).hex()}.tmp"  # secrets.token_hex, without importing hmac
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


def _existing_mode(path: Path) -> int | None:
    """The permission bits of the file ``path`` replaces (a 0600 report stays 0600), or ``None``."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


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
        keep = mode if mode is not None else _existing_mode(path) if replace else None
        if keep is not None:
            os.chmod(tmp, keep)
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


# --------------------------------------------------------------------------------------------
# Reading input files: bounded, regular files only where a stream makes no sense


class InputFileError(UserError):
    """An input file that cannot be read as asked: the message starts with its path."""


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _check_name(path: Path) -> None:
    name_max = int_limit("name_bytes")
    for part in path.parts:
        if len(os.fsencode(part)) > name_max:
            raise InputFileError(f"{str(path)[:80]}...: a name in this path is over {name_max} bytes "
                                 "(the file system's limit)")


def open_regular(path: Path | str, what: str = "file") -> BinaryIO:
    """``path`` opened for reading if it is a regular file; ``InputFileError`` naming the path and
    the cause otherwise. FIFOs and devices (``/dev/zero``) are refused: a data file read whole
    must end, and opening a FIFO without a writer would block. ``O_NONBLOCK`` keeps the open from
    waiting on a FIFO; it is cleared before reading."""
    if not str(path):
        raise InputFileError(f"an empty path was given for the {what}")
    p = Path(path)
    _check_name(p)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputFileError(f"{p}: cannot read the {what}: {_describe(exc)}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputFileError(f"{p}: is a directory, not a {what}")
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"{p}: not a regular file (a FIFO, socket or device such as "
                                 f"/dev/zero cannot be a {what}: save it to a file first)")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes_capped(path: Path | str, what: str = "file", *,
                      max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` (the ``file_bytes`` bound by
    default): a longer file is an ``InputFileError`` naming the bound, read no further."""
    cap = int_limit("file_bytes") if max_bytes is None else max_bytes
    with open_regular(path, what) as fh:
        try:
            data = fh.read(cap + 1)
        except OSError as exc:
            raise InputFileError(f"{path}: cannot read the {what}: {_describe(exc)}") from None
    if len(data) > cap:
        raise InputFileError(f"{path}: the {what} is over the bound of {cap:,} bytes")
    return data


def read_text_capped(path: Path | str, what: str = "file", *, max_bytes: int | None = None,
                     errors: str = "strict") -> str:
    """``read_bytes_capped`` decoded as UTF-8; bytes that are not UTF-8 text (a binary file) are an
    ``InputFileError`` naming the line, unless ``errors="replace"``."""
    data = read_bytes_capped(path, what, max_bytes=max_bytes)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputFileError(f"{path}:{line}: not UTF-8 text (is this a {what}?)") from None


def iter_lines_capped(fh: BinaryIO, path: Path | str, *,
                      max_line_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of a binary handle, each line at most ``max_line_bytes`` (the
    ``line_bytes`` bound): a longer line is an ``InputFileError`` at its line, read no further,
    so one huge line costs at most the bound in memory."""
    cap = int_limit("line_bytes") if max_line_bytes is None else max_line_bytes
    lineno = 0
    while True:
        raw = fh.readline(cap + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > cap and not raw.endswith(b"\n"):
            raise InputFileError(f"{path}:{lineno}: a line over the bound of {cap:,} bytes")
        yield lineno, raw


def iter_line_blocks(fh: BinaryIO, path: Path | str, block_bytes: int, *,
                     max_line_bytes: int | None = None) -> Iterator[list[bytes]]:
    """The lines of a binary handle (without their ``\\n``) in blocks, read ``block_bytes`` at a
    time: a line longer than ``max_line_bytes`` (the ``line_bytes`` bound) is an
    ``InputFileError`` naming its line before more of it is read (``readlines(hint)`` would hold
    the whole of a 300 MB line). A line is at most the bound + one block in memory."""
    cap = int_limit("line_bytes") if max_line_bytes is None else max_line_bytes
    carry = b""
    lineno = 1
    while True:
        chunk = fh.read(block_bytes)
        if not chunk:
            if carry:
                yield [carry]
            return
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n")
        carry = data[cut + 1:]
        if len(carry) > cap:
            at = lineno + data.count(b"\n", 0, cut + 1)
            raise InputFileError(f"{path}:{at}: a line over the bound of {cap:,} bytes")
        if cut < 0:
            continue
        lines = data[:cut].split(b"\n")
        lineno += len(lines)
        yield lines
