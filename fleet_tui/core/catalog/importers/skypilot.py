"""``fleet-tui catalog import-skypilot``: SkyPilot v8 ``vms.csv`` files -> ``<cloud>.toml``.

Files are grouped by cloud (from ``--cloud`` or their folder/file name, see the clouds registry),
read by :mod:`.vms_csv`, turned into offers by :mod:`.offer_rows` (GCP's rows first combined by
:mod:`.gcp`) and written by :mod:`.render`, atomically. Only rows with an accelerator are kept.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from fleet_tui import __version__
from fleet_tui.core.catalog.clouds import CLOUDS
from fleet_tui.core.catalog.importers.offer_rows import import_rows
from fleet_tui.core.catalog.importers.render import render_toml
from fleet_tui.core.catalog.importers.vms_csv import (
    ImportReport,
    Row,
    detect_cloud,
    read_skypilot_csv,
    read_source_txt,
)
from fleet_tui.core.catalog.loading import load_catalog
from fleet_tui.core.catalog.models import literal
from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.core.fsutil import write_atomic


def import_skypilot(files: Sequence[Path | str], *, out_dir: Path | str, cloud: str | None = None,
                    as_of: str | None = None, catalog=None, write: bool = True,
                    replace: bool = True) -> list[ImportReport]:
    """Import SkyPilot CSVs, grouped by cloud, into ``out_dir/<cloud>.toml`` (atomically).
    ``replace=False``: refuse (before writing any) when one of those files exists."""
    if catalog is None:
        catalog = load_catalog()
    if cloud is not None and cloud.lower() not in CLOUDS:
        cloud_ok = re.fullmatch(r"[a-z0-9_-]+", cloud.lower())
        if not cloud_ok:
            raise FieldError("cloud", "{cloud} " + literal(f"{cloud!r}: use a short lower-case name such as "
                                                           f"{', '.join(CLOUDS)}"))
    by_cloud: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        p = Path(f).expanduser()
        if not p.is_file():
            raise UserError(f"{p}: no such file (give SkyPilot vms.csv files)")
        c = (cloud or detect_cloud(p) or "").lower()
        if not c:
            raise FieldError("cloud", literal(f"{p}: cannot tell which cloud this file is for; pass ")
                             + "{cloud} NAME " + literal(f"(one of {', '.join(CLOUDS)} or your own)"))
        by_cloud[c].append(p)
    if as_of is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", as_of):
        raise FieldError("as_of", "{as_of} " + literal(f"{as_of!r}: give an ISO date such as 2026-05-20"))
    folder = Path(out_dir).expanduser()
    if write and folder.exists() and not folder.is_dir():  # mkdir would say "exists": it is a file
        raise FieldError("out_dir", "{out_dir} " + literal(f"{str(folder)!r}: is a file, not a folder "
                                                           "(the folder the <cloud>.toml files go in)"))
    taken = [o for c in by_cloud if (o := folder / f"{c}.toml").exists()]
    if write and not replace and taken:
        raise _exists(taken[0])
    reports = []
    for c, paths in by_cloud.items():
        report = ImportReport(cloud=c)
        rows: list[Row] = []
        has_acc_cols: dict[Path, bool] = {}
        infos = {p: read_source_txt(p) for p in paths}
        for p in paths:
            rs, has_acc = read_skypilot_csv(p)
            has_acc_cols[p] = has_acc
            report.rows_read += len(rs)
            rows.extend(rs)
        # files without accelerator columns (price-only extracts) borrow them from the same type
        known: dict[str, Row] = {}
        for r in rows:
            if r.acc_name and r.instance_type:
                known.setdefault(r.instance_type, r)
        for r in rows:
            if not has_acc_cols[r.file] and r.instance_type in known:
                k = known[r.instance_type]
                r.acc_name, r.acc_count, r.vcpus = k.acc_name, k.acc_count, k.vcpus
                r.ram_gib, r.gpu_mib = k.ram_gib, k.gpu_mib
        # same (type, zone) in two files: the later file wins
        dedup: dict[tuple, Row] = {}
        for r in rows:
            dedup[(r.instance_type, r.region, r.zone, r.acc_name, r.acc_count)] = r
        rows = list(dedup.values())
        sources = {p: infos[p].describe(p) for p in paths}
        main = paths[0]
        source = sources[main] if len(set(sources.values())) == 1 else "; ".join(sorted(set(sources.values())))
        date = as_of or next((infos[p].date for p in paths if infos[p].date), "") or "unknown"
        offers = import_rows(c, rows, catalog, source=source, as_of=date, report=report)
        text = render_toml(c, offers, source=source, as_of=date, version=__version__)
        out = Path(out_dir).expanduser() / f"{c}.toml"
        if write:
            try:
                write_atomic(out, text, replace=replace)
            except FileExistsError:  # made by someone else while we read
                raise _exists(out) from None
            except OSError as exc:  # a folder that cannot be made or written (/proc, read-only)
                raise FieldError("out_dir", "{out_dir} " + literal(
                    f"{str(folder)!r}: cannot write {out.name} there ({exc.strerror or exc})")) from None
        report.out_path = out
        reports.append(report)
    return reports


def _exists(path: Path) -> FieldError:
    return FieldError("force", literal(f"{path}: already exists; ") + "pass {force} to replace it")
