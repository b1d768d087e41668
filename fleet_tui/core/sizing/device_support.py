"""What a device offers a workload: usable memory, and whether it runs the precision at all.

Below :mod:`.layout` and :mod:`.fit`, which both need it.
"""

from __future__ import annotations

from fleet_tui.core import calibration as cal
from fleet_tui.core.capabilities import family_of
from fleet_tui.core.choices import ENGINE_NAMES
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


def capacity_bytes(accelerator: Accelerator) -> int:
    """Device memory a process can use: nominal size less what NVML never reports (~1 %)."""
    return int(accelerator.memory_gib * cal.GiB * cal.USABLE_MEMORY_FRACTION)


def precision_support(precision: str, accelerator: Accelerator,
                      workload: Workload | None = None) -> tuple[bool, str]:
    """(allowed, message). Refused only when the device is *known* not to run ``precision``.

    ``Accelerator.supports`` decides from the architecture (not from which peaks happen to be
    published): unknown support is allowed, and the message then says so (a note, not an error).
    int8/int4 are weight-only formats that run on any CUDA/ROCm GPU. With ``workload`` (the weights'
    precision of that workload), a precision the device has no matrix units for is allowed when the
    workload is inference served by an engine with a weight-only kernel for it on this architecture
    (``[[weight_only]]`` in ``catalogs/capabilities.toml``: fp8 on Ampere under vLLM or SGLang); the
    message then says it runs weight-only. Without ``workload``: the device's own units only (the
    KV cache's dtype, for instance).
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
    alt = _alternatives(precision, accelerator)
    if workload is not None:
        allowed, why = _weight_only(precision, accelerator, workload, alt)
        if allowed or why:
            return allowed, why
    return False, f"{name}{arch} has no {precision} support; use {alt}"


def _alternatives(precision: str, accelerator: Accelerator, training: bool = False) -> str:
    """What to use instead of ``precision`` on ``accelerator`` ("bf16 or fp16 or int8"; training: no
    weight-only format)."""
    alternatives = [p for p in ("bf16", "fp16") if p != precision and accelerator.supports(p)]
    if precision == "fp8" and accelerator.software_stack in ("CUDA", "ROCm") and not training:
        alternatives.append("int8")
    return " or ".join(alternatives) or "fp32"


def _weight_only_servers(precision: str, accelerator: Accelerator) -> tuple[tuple[str, ...], str]:
    """The engines with a weight-only ``precision`` kernel on ``accelerator``, and "vLLM and SGLang
    serve fp8 weights" (empty when none)."""
    from fleet_tui.core.capabilities import weight_only_engines

    engines = weight_only_engines(precision, accelerator.architecture)
    names = " and ".join(ENGINE_NAMES.get(e, e) for e in engines)
    return engines, (f"{names} {'serves' if len(engines) == 1 else 'serve'} {precision} weights" if engines else "")


def _weight_only(precision: str, accelerator: Accelerator, w: Workload, alt: str) -> tuple[bool, str]:
    """(True, note) when ``w``'s engine serves ``precision`` weights weight-only on ``accelerator``;
    (False, reason) when only another engine, or only inference, would; (False, "") when none does."""
    from fleet_tui.core.capabilities import weight_only_kernel

    engines, servers = _weight_only_servers(precision, accelerator)
    if not engines:
        return False, ""
    name, arch = accelerator.id, accelerator.architecture
    if w.is_training:
        use = _alternatives(precision, accelerator, training=True)
        return False, (f"{name} ({arch}) has no {precision} tensor cores, which training in {precision} needs "
                       f"({servers} there weight-only, for inference); use {use}")
    kernel = weight_only_kernel(precision, arch, w.engine)
    if kernel is None:
        flags = " or ".join(f"--engine {e}" for e in engines)
        return False, (f"{name} ({arch}) has no {precision} tensor cores and "
                       f"{ENGINE_NAMES.get(w.engine or '', w.engine)} has no weight-only {precision} kernel for it; "
                       f"{servers} there weight-only ({flags}), or use {alt}")
    compute = "bf16" if accelerator.supports("bf16") else "fp16"
    return True, (f"{precision} weights run weight-only on {name} ({arch}: no {precision} tensor cores): "
                  f"{kernel.kernel} stores them in {precision} and multiplies in {compute}, "
                  f"activations {compute}")


def workload_unsupported(w: Workload, accelerator: Accelerator) -> str | None:
    """Why ``accelerator``'s software stack cannot run ``w`` (QLoRA or 8-bit AdamW without
    bitsandbytes, fp8 training without fp8 units, training on an inference-only device), or None
    (:func:`fleet_tui.core.capabilities.unsupported`)."""
    from fleet_tui.core.capabilities import unsupported

    why = unsupported(accelerator.id, accelerator.software_stack, w.kind, w.optimizer, w.precision)
    if why is not None and w.is_training and accelerator.supports(w.precision) is False:
        _, servers = _weight_only_servers(w.precision, accelerator)
        why += (f": {accelerator.id} ({accelerator.architecture}) has no {w.precision} tensor cores, which "
                f"training in {w.precision} needs; use {_alternatives(w.precision, accelerator, True)}")
        if servers:
            why += f" ({servers} on it weight-only when serving)"
    return why
