"""Accelerator names as people type and tools print them, reduced to one key.

``H100``, ``h100_sxm``, ``'H100 80GB'`` (the Monitor's label), ``'NVIDIA H100 80GB HBM3'``
(nvidia-smi's name) and ``H100-SXM5`` are the same device. The key of a name is its lower-case
letters and digits with the separators dropped, the vendor and brand words dropped (``nvidia``,
``amd``, ``instinct``, ``habana``, …), the memory technology and socket dropped (``hbm3``,
``hbm3e``, ``gddr6x``, ``sxm5``, ``oam``: they never tell two catalog devices apart), and a memory
size written ``80GB``, ``80 GB``, ``80GiB`` or ``80G`` as ``80g``. What does tell devices apart stays
in the key: ``pcie`` and ``nvl`` (H100 PCIe and H100 NVL are other devices), ``ada``, ``ti``.

Each accelerator is known by the keys of its id, name and aliases, and by its id's and name's
key followed by its memory (``h100`` + ``80g``), so a size typed after the name finds it. A key
that two accelerators share is dropped rather than guessed (`index`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# Words that name a vendor or a product line, never one device (as nvidia-smi, amd-smi and
# hl-smi print them: "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X", "Habana Labs HL-225").
_BRAND_WORDS = ("nvidia", "amd", "intel", "habana", "labs", "aws", "google", "geforce",
                "radeon", "instinct", "tesla", "quadro")
_BRANDS = re.compile(r"\b(?:" + "|".join(_BRAND_WORDS) + r")\b")
# Memory technology and socket: the same device in every spelling ("H100 SXM5", "HBM3").
_PACKAGING = re.compile(r"(?:hbm\d*e?|gddr\d*x?|sxm\d*|oam)(?![a-z])")
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*(?:gib|gb|g)(?![a-z])")
_SEPARATORS = re.compile(r"[^a-z0-9.]+")


def name_key(name: str) -> str:
    """The key of an accelerator name: ``'NVIDIA H100 80GB HBM3'`` -> ``'h10080g'``."""
    text = _SEPARATORS.sub(" ", str(name).lower())
    text = _BRANDS.sub(" ", text)
    text = _PACKAGING.sub(" ", text)
    text = _MEMORY.sub(lambda m: f"{float(m.group(1)):g}g", text)
    return re.sub(r"[^a-z0-9]", "", text.replace(".", "_"))


def _memory_suffix(memory_gib: float | None) -> str:
    if not memory_gib:
        return ""
    return f"{float(memory_gib):g}g".replace(".", "")


def keys_of(acc: Any) -> Iterable[str]:
    """Every key ``acc`` is known by: its id, name and aliases, and id or name with its memory."""
    names = [acc.id, acc.name, *(acc.aliases or ())]
    suffix = _memory_suffix(getattr(acc, "memory_gib", None))
    for name in names:
        if name:
            key = name_key(name)
            yield key
            if suffix and not key.endswith(suffix):
                yield key + suffix


def index(accelerators: Mapping[str, Any]) -> dict[str, str]:
    """Key -> accelerator id, for every key that names exactly one accelerator."""
    found: dict[str, str] = {}
    shared: set[str] = set()
    for acc in accelerators.values():
        for key in set(keys_of(acc)):
            if not key:
                continue
            if found.setdefault(key, acc.id) != acc.id:
                shared.add(key)
    for acc in accelerators.values():  # a device's own id never loses to another's alias
        found[name_key(acc.id)] = acc.id
        shared.discard(name_key(acc.id))
    return {key: acc_id for key, acc_id in found.items() if key not in shared}
