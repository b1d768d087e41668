"""Reading SkyPilot v8 ``vms.csv`` files: rows by column name, and their provenance.

Columns are read by name (each cloud orders them differently). ``GpuInfo`` is a Python dict literal
(AWS, Lambda, Vast, RunPod), a bare number, or just a name (Azure, GCP TPU). A ``SOURCE.txt`` next to
a CSV gives the repository, path, commit and date it was taken from.
"""

from __future__ import annotations

import ast
import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet_tui.core.catalog.clouds import CLOUDS
from fleet_tui.core.errors import UserError
from fleet_tui.core.fsutil import read_bytes_capped, read_text_capped


@dataclass
class SourceInfo:
    repo_path: str = ""
    commit: str = ""
    date: str = ""

    def describe(self, file: Path) -> str:
        parts = [self.repo_path or file.name]
        if self.commit:
            parts.append(f"@ {self.commit}")
        return " ".join(parts)


def read_source_txt(csv_path: Path) -> SourceInfo:
    """Provenance from a ``SOURCE.txt`` next to the CSV (repository, path, commit, date).

    A SOURCE.txt describing several snapshots has one block per snapshot, each opening with a
    ``Source:`` line; the block that names the CSV file describes it (else the first block).
    """
    src = csv_path.parent / "SOURCE.txt"
    info = SourceInfo()
    if not src.is_file():
        return info
    text = read_text_capped(src, "SOURCE.txt", errors="replace")
    blocks = [b for b in re.split(r"(?m)^(?=Source:)", text) if b.strip()]
    text = next((b for b in blocks if csv_path.name in b), blocks[0] if blocks else text)
    m = re.search(r"Source:\s*([\w.-]+/[\w.-]+).*?\bpath\s+(\S+?)[,\s]", text, re.S)
    if m:
        info.repo_path = f"{m.group(1)}:{m.group(2)}"
    head = text.split("\n\n")[0]
    m = re.search(r"\b([0-9a-f]{40})\b", head)
    if m:
        info.commit = m.group(1)
    # the date of the snapshot: the first date written right after a commit hash, e.g.
    # "commit 62ff0a9... (2026-05-20 04:50:10 +0000" or "in 4c06102..., 2026-05-07"
    m = re.search(r"\b[0-9a-f]{40}\b[^0-9\n]{0,12}(\d{4}-\d{2}-\d{2})", head)
    if m:
        info.date = m.group(1)
    return info


def detect_cloud(path: Path) -> str | None:
    """The registered cloud a file belongs to, from its folder or file name."""
    folders = {c.folder: c.id for c in CLOUDS.values()}
    for part in (path.parent.name, path.stem, *path.parts):
        p = part.lower()
        if p in folders:
            return folders[p]
    return None


def number(v: Any) -> float | None:
    if v is None:
        return None
    s = str(v).strip()
    if not s:
        return None
    try:
        x = float(s)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _gpuinfo_mib(raw: str | None) -> tuple[float | None, str | None]:
    """(SizeInMiB of the first GPU, its Name) from a GpuInfo cell (dict literal or bare number)."""
    if raw is None:
        return None, None
    s = str(raw).strip()
    if not s:
        return None, None
    x = number(s)
    if x is not None:
        return x, None
    if s.startswith("{"):
        try:
            info = ast.literal_eval(s)
        except (ValueError, SyntaxError):
            return None, None
        gpus = info.get("Gpus") or [{}]
        g = gpus[0] if gpus else {}
        mib = (g.get("MemoryInfo") or {}).get("SizeInMiB")
        return (number(mib), g.get("Name"))
    return None, s  # Azure / GCP TPU: just a name


@dataclass
class Row:
    file: Path
    instance_type: str
    region: str
    zone: str
    acc_name: str
    acc_count: float | None
    vcpus: float | None
    ram_gib: float | None
    gpu_mib: float | None
    gpu_info_name: str | None
    price: float | None
    spot: float | None
    notes: list[str] = field(default_factory=list)


def read_skypilot_csv(path: Path) -> tuple[list[Row], bool]:
    """Rows of one SkyPilot-format CSV, columns matched by name."""
    raw = read_bytes_capped(path, "SkyPilot CSV")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # a binary or mis-encoded file: say where, not a traceback
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UserError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); give SkyPilot's "
                        "vms.csv") from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise UserError(f"{path}:{line}: not a CSV file (it holds NUL bytes); give SkyPilot's vms.csv")
    with io.StringIO(text, newline="") as fh:
        reader = csv.DictReader(fh)
        cols = reader.fieldnames or []
        need = {"InstanceType", "Region", "Price"}
        missing = need - set(cols)
        if missing:
            raise UserError(f"{path}:1: header lacks {', '.join(sorted(missing))}; a SkyPilot vms.csv has "
                            "InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, GpuInfo, "
                            "Price, SpotPrice, Region[, AvailabilityZone] in any order")
        gpu_col = next((c for c in cols if c.startswith("GpuInfo") and "note" not in c.lower()), None)
        rows = []
        for rec in reader:
            mib, gname = _gpuinfo_mib(rec.get(gpu_col) if gpu_col else None)
            rows.append(Row(
                file=path,
                instance_type=(rec.get("InstanceType") or "").strip(),
                # Vast lists some hosts without a city (", US, NA"): drop the empty part
                region=(rec.get("Region") or "").strip().lstrip(", ").strip(),
                zone=(rec.get("AvailabilityZone") or "").strip(),
                acc_name=(rec.get("AcceleratorName") or "").strip(),
                acc_count=number(rec.get("AcceleratorCount")),
                vcpus=number(rec.get("vCPUs")),
                ram_gib=number(rec.get("MemoryGiB")),
                gpu_mib=mib, gpu_info_name=gname,
                price=number(rec.get("Price")), spot=number(rec.get("SpotPrice")),
            ))
        return rows, ("AcceleratorName" in cols)


@dataclass
class ImportReport:
    """What one cloud's import read, wrote, skipped and flagged (printed by the command)."""

    cloud: str
    out_path: Path | None = None
    offers: int = 0
    rows_read: int = 0
    rows_skipped: dict[str, int] = field(default_factory=dict)
    unresolved: dict[str, int] = field(default_factory=dict)
    flagged: int = 0
    excluded: int = 0

    def skip(self, why: str) -> None:
        self.rows_skipped[why] = self.rows_skipped.get(why, 0) + 1

