"""What a device offers a workload: usable memory, and whether it runs the precision at all.

Below :mod:`.layout` and :mod:`.fit`, which both need it.
"""

from __future__ import annotations

from fleet_tui.core import calibration as cal
from fleet_tui.core.capabilities import family_of
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


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
    fam = family_of(name)
    # fp8 needs fp8 matrix units: a family that lists its precisions without fp8 has none (TPU v5e/v6e)
    if precision == "fp8" and fam is not None and fam.precisions and precision not in fam.precisions:
        listed = ", ".join(p for p in fam.precisions if p != "fp32")
        return False, (f"{name} ({fam.stack}) runs {listed}, not {precision} (catalogs/capabilities.toml)")
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


def workload_unsupported(w: Workload, accelerator: Accelerator) -> str | None:
    """Why ``accelerator``'s software stack cannot run ``w`` (QLoRA or 8-bit AdamW without
    bitsandbytes, fp8 training without fp8 units, training on an inference-only device), or None
    (:func:`fleet_tui.core.capabilities.unsupported`)."""
    from fleet_tui.core.capabilities import unsupported

    return unsupported(accelerator.id, accelerator.software_stack, w.kind, w.optimizer, w.precision)
