"""The compiled catalog: the loaded catalog saved in the user cache dir, so a command reads it in
milliseconds instead of parsing and checking every TOML file again (bench/bench_catalog.py
has the numbers: about 0.2 s of parsing and checking against a few ms of reading).

The TOML files stay the source of truth. The cache file
``$XDG_CACHE_HOME/fleet-tui/catalog-<hash of the directory list>.bin`` holds a key and the catalog;
it is used only while its key equals the current one: the format, the package and Python versions
(accelerators and models are pickled dataclasses), the size and mtime of this package's record and
validation code, and the path, size and mtime of every catalog file read (a
file added, removed or edited changes it). Otherwise the catalog is built from TOML and the file
rewritten. (A file rewritten within the file system's timestamp granularity with the same size
would go unseen, as with any mtime-based cache: `catalog validate` always re-reads.)

* Concurrent processes: a writer fills a temp file in the same directory and renames it over the
  old one (``os.replace``), so a reader sees a whole file, old or new, never half of one.
* A corrupt file (truncated, bit flips, written by other code) fails its CRC-32 or its unpickling:
  the catalog is built from TOML, the file rewritten, and a warning logged once per process.
* An unwritable cache directory costs the speed only: the catalog is built from TOML every time.
* Bounded: each directory list has its own file (~0.6 MB for the bundled catalog). A write keeps
  the :data:`KEEP_FILES` newest files of its kind and removes the rest, and temp files a crashed
  writer left behind more than an hour ago; a removed file is only rebuilt when next needed.

Offers are stored per accelerator (``marshal``-ed tuples, the fields of :class:`Instance` in order,
with their position in the catalog) and built only when asked for (:class:`CompiledOffers`), so
``size`` builds one device's offers, not 2,756. Accelerators and models are few and pickled whole.
The file is trusted like any file in the user's own cache directory (pickle runs code on load).
"""

from __future__ import annotations

import functools
import marshal
import os
import pickle
import struct
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TypeVar

from fleet_tui import __version__
from fleet_tui.core.catalog.models import Catalog, Instance

FORMAT = 2  # 2: accelerators and models are dataclasses (fleet_tui.core.records), not pydantic models
_MAGIC_FAMILY = b"fleet-tui catalog"  # every format's files start so
_MAGIC = _MAGIC_FAMILY + b" %d\n" % FORMAT
_HEADER = struct.Struct("<I")  # CRC-32 of the payload
_warned = False
KEEP_FILES = 8  # per kind (catalog, interconnects, capabilities): a few --catalog-dir combinations
STALE_TEMP_S = 3600.0  # a temp file this old is a crashed writer's, not one still being written
T = TypeVar("T")
_ROW_FIELDS = tuple(f.name for f in fields(Instance))  # Instance(*row) rebuilds an offer

# The code whose classes are pickled or whose rules decide what a load yields: an edit to it (an
# editable install keeps its version) makes every compiled catalog stale.
# (Paths, not imports: a cache hit must not pay for importing the TOML and validation code.)
_PACKAGE = Path(__file__).parent
_CODE_FILES = (*sorted(_PACKAGE / name for name in os.listdir(_PACKAGE) if name.endswith(".py")),
               *(_PACKAGE.parent / name for name in ("specs.py", "modelspec.py", "records.py", "tomlio.py", "limits.py",
                                                     "interconnects.py", "capabilities.py")))


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/fleet-tui`` (default ``~/.cache/fleet-tui``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fleet-tui"


def cache_path(dirs: Sequence[Path]) -> Path:
    """The compiled catalog for this list of catalog directories."""
    digest = zlib.crc32("\n".join(str(d) for d in dirs).encode())
    return cache_dir() / f"catalog-{digest:08x}.bin"


def _validator_file() -> Path | None:
    """pydantic's ``version.py`` (its stamp stands for the validator's version without importing
    pydantic, which costs a cache hit ~40 ms: bench/bench_catalog.py)."""
    for entry in sys.path:
        candidate = os.path.join(entry or ".", "pydantic", "version.py")
        if os.path.isfile(candidate):
            return Path(candidate)
    return None


@functools.cache  # once per process: two loads (catalog, interconnects) share it
def _code_stamps() -> tuple[tuple[str, int, int], ...]:
    out = []
    for f in (*_CODE_FILES, _validator_file() or _PACKAGE):
        try:
            st = os.stat(f)
            out.append((f.name, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((f.name, 0, 0))
    return tuple(out)


def file_stamps(files: Sequence[Path]) -> tuple[tuple[str, int, int], ...]:
    """``(path, mtime_ns, size)`` of each file: a load is current while these are unchanged."""
    stamp = []
    for f in files:
        try:
            st = os.stat(f)
            stamp.append((str(f), st.st_mtime_ns, st.st_size))
        except OSError:
            stamp.append((str(f), 0, 0))
    return tuple(stamp)


def cache_key(dirs: Sequence[Path], stamps: tuple[tuple[str, int, int], ...]) -> tuple:
    """Everything a compiled catalog depends on (see the module docstring)."""
    return (FORMAT, __version__, sys.version, _code_stamps(), tuple(str(d) for d in dirs),
            stamps)


class CompiledOffers:
    """A catalog's offers as stored: one marshal blob per accelerator, built on demand."""

    def __init__(self, blobs: dict[str, bytes], count: int):
        self._blobs = blobs
        self._count = count
        self._built: dict[str, tuple[list[int], list[Instance]]] = {}

    def _group(self, accelerator_id: str) -> tuple[list[int], list[Instance]]:
        group = self._built.get(accelerator_id)
        if group is None:
            blob = self._blobs.get(accelerator_id)
            positions, rows = marshal.loads(blob) if blob is not None else ([], [])
            group = self._built[accelerator_id] = (positions, [Instance(*row) for row in rows])
        return group

    def offers_of(self, accelerator_id: str) -> list[Instance]:
        return list(self._group(accelerator_id)[1])

    def all_offers(self) -> list[Instance]:
        out: list[Instance | None] = [None] * self._count
        for accelerator_id in self._blobs:
            positions, offers = self._group(accelerator_id)
            for pos, inst in zip(positions, offers):
                out[pos] = inst
        return out  # type: ignore[return-value]  # every position is filled


def _encode(content: dict) -> bytes:
    payload = pickle.dumps(content, protocol=pickle.HIGHEST_PROTOCOL)
    return _MAGIC + _HEADER.pack(zlib.crc32(payload)) + payload


def _decode(data: bytes) -> dict | None:
    """The content of a cache file; None when another format wrote it (stale: rebuilt without a
    word, as after an upgrade); :class:`CorruptCache` when it is not a whole one."""
    head = len(_MAGIC) + _HEADER.size
    if not data.startswith(_MAGIC) and data.startswith(_MAGIC_FAMILY) and len(data) > len(_MAGIC):
        return None
    if not data.startswith(_MAGIC) or len(data) < head:
        raise CorruptCache("not a compiled catalog")
    (crc,) = _HEADER.unpack_from(data, len(_MAGIC))
    payload = memoryview(data)[head:]
    if zlib.crc32(payload) != crc:
        raise CorruptCache("checksum mismatch (truncated or damaged)")
    try:
        content = pickle.loads(payload)
    except Exception as exc:  # any failure to rebuild the objects means the file is unusable
        raise CorruptCache(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(content, dict) or "key" not in content:
        raise CorruptCache("not a compiled catalog")
    return content


def compile_catalog(cat: Catalog, key: tuple) -> bytes:
    """The bytes of a compiled catalog file for ``cat`` under ``key``."""
    groups: dict[str, tuple[list[int], list[tuple]]] = {}
    for pos, inst in enumerate(cat.instances):
        positions, rows = groups.setdefault(inst.accelerator, ([], []))
        positions.append(pos)
        rows.append(tuple(getattr(inst, name) for name in _ROW_FIELDS))
    return _encode({
        "key": key,
        "accelerators": cat.accelerators, "models": cat.models,
        "problems": cat.problems, "sources": cat.sources, "files": cat.files,
        "offer_count": len(cat.instances),
        "offers": {acc: marshal.dumps(group) for acc, group in groups.items()},
    })


class CorruptCache(Exception):
    """The compiled catalog file cannot be read back."""


def parse_compiled(data: bytes, key: tuple) -> Catalog | None:
    """The catalog in ``data`` if it was compiled under ``key``; None when stale.

    Raises :class:`CorruptCache` when ``data`` is not a whole compiled catalog.
    """
    content = _decode(data)
    try:
        if content is None or content["key"] != key:
            return None
        offers = CompiledOffers(content["offers"], content["offer_count"])
        return Catalog(content["accelerators"], content["models"], problems=content["problems"],
                       sources=content["sources"], files=content["files"], offers=offers,
                       offer_count=content["offer_count"])
    except Exception as exc:  # any failure to rebuild the objects means the file is unusable
        raise CorruptCache(f"{type(exc).__name__}: {exc}") from exc


def _read(path: Path, parse: Callable[[bytes], T]) -> T | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return parse(data)
    except CorruptCache as exc:
        _warn_once(f"fleet-tui: warning: catalog cache {path} is unreadable ({exc}); "
                   "rebuilt from the TOML files")
        return None


def read_compiled(path: Path, key: tuple) -> Catalog | None:
    """The compiled catalog at ``path`` when current; None when missing, stale or corrupt (a
    corrupt one is reported once per process)."""
    return _read(path, lambda data: parse_compiled(data, key))


def write_compiled(path: Path, cat: Catalog, key: tuple) -> bool:
    """Save ``cat`` at ``path`` atomically; False (and nothing written) when that is not possible."""
    return _write(path, lambda: compile_catalog(cat, key))


def cached_load(name: str, files: Sequence[Path], build: Callable[[], T]) -> T:
    """``build()`` (a picklable value read from ``files``), kept in the cache dir beside the compiled
    catalog with the same guarantees, and reused while ``files`` and the code are unchanged: a small
    bundled table (interconnects, capabilities) then loads without parsing TOML or importing
    pydantic. An exception from ``build`` propagates and nothing is saved."""
    key = (FORMAT, __version__, sys.version, _code_stamps(), file_stamps(files))
    digest = zlib.crc32("\n".join(str(f) for f in files).encode())
    path = cache_dir() / f"{name}-{digest:08x}.bin"
    content = _read(path, _decode)
    if content is not None and content["key"] == key and "value" in content:
        return content["value"]
    value = build()
    _write(path, lambda: _encode({"key": key, "value": value}))
    return value


def _write(path: Path, encode: Callable[[], bytes]) -> bool:
    try:
        data = encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # only when writing: it costs every cache hit ~5 ms (random, shutil)

        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except (OSError, pickle.PicklingError, TypeError, ValueError):
        return False  # no cache: every load parses the TOML files, nothing else changes
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    _prune(path)
    return True


def _prune(written: Path) -> None:
    """Keep the :data:`KEEP_FILES` newest cache files of ``written``'s kind (``written`` among
    them); remove the others and stale temp files of that kind. Best effort: another process may
    be pruning too."""
    kind = written.name.split("-", 1)[0]
    now = time.time()
    found: list[tuple[float, str]] = []  # (mtime, path) of each cache file of this kind
    try:
        with os.scandir(written.parent) as entries:
            for e in entries:
                name = e.name
                try:
                    if name.startswith(f"{kind}-") and name.endswith(".bin"):
                        found.append((e.stat().st_mtime, e.path))
                    elif (name.startswith(f".{kind}-") and name.endswith(".tmp")
                          and now - e.stat().st_mtime > STALE_TEMP_S):
                        os.unlink(e.path)
                except OSError:
                    continue
    except OSError:
        return
    found.sort(reverse=True)
    for _, old in found[KEEP_FILES:]:
        if old != str(written):
            try:
                os.unlink(old)
            except OSError:
                pass


def _warn_once(message: str) -> None:
    # logging is imported only here: importing it costs a cache hit ~5 ms (bench/bench_catalog.py)
    import logging

    global _warned
    if not _warned:
        _warned = True
        logging.getLogger(__name__).warning(message)
