"""Loading the catalog: which files, in which order, merged how.

Load order (same id: the later one wins): the bundled ``catalogs/`` directory, then the user's
``$XDG_CONFIG_HOME/fleet-tui/catalogs/``, then each ``--catalog-dir``. In each directory every
``*.toml`` and ``instances/*.toml`` is read (``workloads.toml``, ``interconnects.toml`` and
``capabilities.toml`` have their own loaders).

A broken file never stops loading: every problem is recorded in ``Catalog.problems`` as
``file:line: field: message`` and the file is skipped whole, so nothing is half-loaded from it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet_tui.core import paths
from fleet_tui.core.catalog import compiled
from fleet_tui.core.catalog.compiled import file_stamps
from fleet_tui.core.catalog.models import Catalog, Instance, accelerator_index, literal
from fleet_tui.core.errors import FieldError

if TYPE_CHECKING:
    from fleet_tui.core.catalog.validation import FileResult

# loaded by core.scenarios, core.interconnects, core.capabilities
SKIPPED_FILES = frozenset({"workloads.toml", "interconnects.toml", "capabilities.toml"})


def catalog_files(directory: Path) -> list[Path]:
    """The catalog files of one directory, in load order."""
    if not directory.is_dir():
        return []
    top = sorted(p for p in directory.glob("*.toml") if p.name not in SKIPPED_FILES)
    # accelerators first so a directory's instances can use the devices it defines
    top.sort(key=lambda p: (p.name != "accelerators.toml", p.name))
    return top + sorted((directory / "instances").glob("*.toml"))


def catalog_dirs(extra_dirs: Sequence[Path | str] = (), include_user: bool = True) -> list[Path]:
    dirs = [paths.bundled_catalog_dir()]
    if include_user:
        dirs.append(paths.user_catalog_dir())
    dirs.extend(Path(d).expanduser() for d in extra_dirs)
    return dirs


def _build_instance(d: dict[str, Any], acc) -> Instance:
    kw = dict(d)
    kw["accelerator"] = acc.id if acc is not None else d["accelerator"]
    if "accelerator_memory_gib" not in kw:
        kw["accelerator_memory_gib"] = float(acc.memory_gib) if acc is not None else 0.0
    return Instance(**kw)


def _merge_by_id(results: Iterable[FileResult], attr: str) -> dict[str, Any]:
    """Entries of every file by id, a later same id (any case) replacing the earlier one."""
    merged: dict[str, Any] = {}
    for r in results:
        for entry in getattr(r, attr):
            for k in [k for k in merged if k.lower() == entry.id.lower()]:
                del merged[k]
            merged[entry.id] = entry
    return merged


def build_catalog(files: Sequence[Path], user_files: Iterable[Path] = ()) -> Catalog:
    """Load ``files`` in order (later same id wins) into a :class:`Catalog`.

    A file with any problem is skipped whole and its problems recorded.
    """
    # Imported here, not at the top: a load from the compiled catalog never parses TOML, and
    # skipping the TOML and validation imports saves it ~15 ms (bench/bench_catalog.py).
    from fleet_tui.core.catalog.validation import read_catalog_file, unknown_accelerator_problems

    results = [read_catalog_file(p) for p in files]
    problems: list[str] = []
    good = [r for r in results if not r.problems]
    for r in results:
        problems.extend(r.problems)
    # accelerators and models from every good file, then instances resolved against them. A file
    # whose instances name an unknown accelerator is dropped whole and the merge redone.
    dropped_all: list[FileResult] = []
    while True:
        accs = _merge_by_id(good, "accelerators")
        index = accelerator_index(accs)
        names = list(accs) + [a for acc in accs.values() for a in acc.aliases]
        dropped = []
        for r in good:
            probs = unknown_accelerator_problems(r, index, names,
                                                  " Add it to an accelerators file or fix the name.")
            if probs:
                r.problems = probs
                dropped.append(r)
        if not dropped:
            break
        dropped_all.extend(dropped)
        for r in dropped:
            problems.extend(r.problems)
        good = [r for r in good if r not in dropped]
    models = _merge_by_id(good, "models")
    # files rejected for other problems: still report instances naming unknown accelerators
    # (validate shows all), once: the files dropped above have reported theirs
    for r in results:
        if r.problems and r.doc is not None and r not in good and not any(r is d for d in dropped_all):
            problems.extend(unknown_accelerator_problems(r, index, list(accs)))
    merged: dict[tuple[str, str, str], Instance] = {}
    sources: dict[str, dict[str, str]] = {}
    for r in good:
        for _, d in r.rows:
            acc_id = index.get(d["accelerator"].strip().lower())
            inst = _build_instance(d, accs.get(acc_id) if acc_id else None)
            merged[(inst.cloud.lower(), inst.instance_type.lower(), inst.region.lower())] = inst
        meta = {k: v for k, v in r.meta.items() if k in ("cloud", "source", "as_of", "notes")}
        if r.accelerators and "source" not in meta:
            meta["source"] = f"{len(r.accelerators)} accelerators"
        sources[str(r.path)] = meta
    return Catalog(accs, models, list(merged.values()), problems, sources, [str(r.path) for r in good])


def source_files(extra_dirs: Sequence[Path | str] = (), include_user: bool = True) -> tuple[list[Path], list[Path]]:
    """``(directories, files)`` a load reads; an extra directory that is not one is a FieldError."""
    for d in extra_dirs:
        p = Path(d).expanduser()
        if not p.is_dir():
            raise FieldError("catalog_dir", "{catalog_dir} " + literal(
                f"{d}: not a directory (it should hold *.toml catalog files, instances/*.toml optional)"))
    dirs = catalog_dirs(extra_dirs, include_user)
    return dirs, [f for d in dirs for f in catalog_files(d)]


# The latest catalog loaded in this process (catalogs are a few MB: one is kept).
_LATEST: dict[tuple, Catalog] = {}
_LATEST_LOCK = threading.Lock()


def load_catalog(extra_dirs: Sequence[Path | str] = (), include_user: bool = True, *,
                 reload: bool = False) -> Catalog:
    """Bundled catalog, then the user's, then each of ``extra_dirs`` (later same id wins).

    Read from the compiled catalog in the user cache dir while it is current
    (:mod:`fleet_tui.core.catalog.compiled`), else from TOML (and the compiled one rewritten), and
    kept in the process per directory list and file modification times, so an edited file is
    re-read. ``reload=True`` forces a fresh load from TOML. An extra directory that does not exist
    is a FieldError (``catalog_dir``); a missing user directory is simply empty.
    """
    dirs, files = source_files(extra_dirs, include_user)
    stamps = file_stamps(files)
    key = compiled.cache_key(dirs, stamps)
    with _LATEST_LOCK:
        if not reload and key in _LATEST:
            return _LATEST[key]
    path = compiled.cache_path(dirs)
    cat = None if reload else compiled.read_compiled(path, key)
    if cat is None:
        cat = build_catalog(files)
        compiled.write_compiled(path, cat, key)
    with _LATEST_LOCK:
        _LATEST.clear()
        _LATEST[key] = cat
    return cat


def clear_cache() -> None:
    """Forget the catalog kept in this process."""
    with _LATEST_LOCK:
        _LATEST.clear()


def validate_paths(targets: Sequence[Path | str]) -> tuple[list[str], Catalog]:
    """Check files or directories as a catalog on top of the bundled one.

    Instances may name accelerators from the bundled catalog. Returns ``(problems, catalog)``.
    """
    files: list[Path] = []
    problems: list[str] = []
    for t in targets:
        p = Path(t).expanduser()
        if p.is_dir():
            found = catalog_files(p)
            if not found:
                problems.append(f"{p}: no *.toml catalog files in this directory")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            problems.append(f"{p}: no such file or directory")
    bundled = catalog_files(paths.bundled_catalog_dir())
    # realpath, not Path.resolve: that raises RuntimeError on a symlink loop (the file's own
    # problem, reported when it is read)
    bundled_resolved = {os.path.realpath(b) for b in bundled}
    extra = [f for f in files if os.path.realpath(f) not in bundled_resolved]
    cat = build_catalog(bundled + extra)
    return problems + cat.problems, cat
