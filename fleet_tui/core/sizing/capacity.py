"""What a device offers a workload: usable memory, and whether it runs the precision at all.

Below :mod:`.layout` and :mod:`.fit`, which both need it.
"""

from __future__ import annotations

from fleet_tui.core import calibration as cal
from fleet_tui.core.specs import Accelerator


def capacity_bytes(accelerator: Accelerator) -> int:
    """Device memory a process can use: nominal size less what NVML never reports (~1 %)."""
    return int(accelerator.memory_gib * cal.GiB * cal.USABLE_MEMORY_FRACTION)


def precision_support(precision: str, accelerator: Accelerator) -> tuple[bool, str]:
    """(allowed, message). Refused only when the device is *known* not to run ``precision``.

    ``Accelerator.supports`` decides from the architecture (not from which peaks happen to be
    published): unknown support is allowed, and the message then says so (a note, not an error).
    int8/int4 are weight-only formats that run on any CUDA/ROCm GPU.
    """
    name = accelerator.id
    known = accelerator.supports(precision)
    if precision in ("int8", "int4"):
        if known or accelerator.software_stack in ("CUDA", "ROCm"):
            return True, ""
        if known is None:
            return True, (f"{name}: {precision} support is not documented for its architecture "
                          f"({accelerator.architecture or 'unknown'}); assumed to run")
        return False, (f"{name} has no {precision} kernels in its software stack "
                       f"({accelerator.software_stack}); use bf16 or fp16")
    if precision == "fp32" or known:
        return True, ""
    if known is None:
        return True, (f"{name}: {precision} support is not documented for its architecture "
                      f"({accelerator.architecture or 'unknown'}); assumed to run")
    arch = f" ({accelerator.architecture})" if accelerator.architecture else ""
    alternatives = [p for p in ("bf16", "fp16") if p != precision and accelerator.supports(p)]
    if precision == "fp8" and accelerator.software_stack in ("CUDA", "ROCm"):
        alternatives.append("int8")
    alt = " or ".join(alternatives) or "fp32"
    return False, f"{name}{arch} has no {precision} support; use {alt}"
