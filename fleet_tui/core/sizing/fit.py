"""Whether a workload fits an accelerator, and the smallest changes that make it fit.

Capacity is the device's nominal memory less what NVML never reports (about 1 %,
:data:`calibration.USABLE_MEMORY_FRACTION`). A misfit is answered with single changes, least
disruptive first (precision, checkpointing, optimizer, master weights, LoRA/QLoRA, more GPUs,
smaller batch, shorter sequences), each verified by re-running :func:`.memory.estimate_memory`;
when none fits alone for training, checkpointing is paired with the others. A suggestion names the
inputs it changes as ``{field}`` placeholders (argparse dests): the CLI shows them as flags, the
builder as its form labels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from fleet_tui.core import caches
from fleet_tui.core import calibration as cal
from fleet_tui.core.errors import render_fields
from fleet_tui.core.sizing.memory import MemoryBreakdown, estimate_memory
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload


@dataclass(frozen=True, slots=True)
class FitSuggestion:
    template: str  # e.g. "use 8-bit AdamW ({optimizer} adamw8bit)": each {name} is an input field
    workload: Workload
    total_bytes: int
    gpus: int
    change: str = ""  # short key: "precision", "checkpointing", "optimizer", "gpus", "batch", "lora"...

    def render(self, label: Callable[[str], str]) -> str:
        """The sentence with each input field shown as ``label(field)`` (a flag, a form label)."""
        return render_fields(self.template, label)

    @property
    def description(self) -> str:
        return self.render(lambda name: name)


@dataclass(frozen=True)
class FitResult:
    fits: bool
    memory: MemoryBreakdown
    capacity_bytes: int
    headroom_bytes: int
    accelerator: str = ""
    gpus: int = 1
    precision_supported: bool = True  # False only when the device is known not to run it
    message: str = ""
    precision_note: str = ""  # set when support is undocumented (allowed, but say so)
    # what was checked, so the suggestions can be searched when first read
    workload: Workload | None = field(default=None, repr=False, compare=False)
    device: Accelerator | None = field(default=None, repr=False, compare=False)

    @cached_property
    def suggestions(self) -> list[FitSuggestion]:
        """Changes that make it fit (none when it fits). Searched on first read: ranking checks
        hundreds of misfits and reads few of their suggestions (each costs a few dozen estimates)."""
        if self.fits or self.workload is None or self.device is None:
            return []
        return suggest_fixes(self.workload, self.gpus, self.device)


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


def _candidates(w: Workload, gpus: int, acc: Accelerator) -> list[tuple[str, str, Workload, int]]:
    """Single changes, least disruptive first: (change key, description, workload, gpus)."""
    out: list[tuple[str, str, Workload, int]] = []
    if w.is_training:
        if not w.grad_checkpointing:
            out.append(("checkpointing", "turn on activation checkpointing ({grad_checkpointing}; "
                        "~25-30 % slower steps)", w.derive(grad_checkpointing=True), gpus))
        if w.optimizer == "adamw":
            out.append(("optimizer", "use 8-bit AdamW ({optimizer} adamw8bit)",
                        w.derive(optimizer="adamw8bit"), gpus))
        if not w.is_adapter and w.master_weights == "fp32" and w.precision in ("bf16", "fp16"):
            out.append(("master_weights", f"train in pure {w.precision} without fp32 master weights "
                        "({master_weights} none)", w.derive(master_weights="none"), gpus))
        if w.kind in ("training", "finetune"):
            out.append(("lora", "fine-tune LoRA adapters instead of all weights ({workload} lora)",
                        w.derive(kind="lora", master_weights="none"), gpus))
        if w.kind in ("training", "finetune", "lora"):
            out.append(("qlora", "QLoRA: 4-bit base + LoRA adapters ({workload} qlora)",
                        w.derive(kind="qlora", master_weights="none",
                                precision=w.precision if w.precision in ("bf16", "fp16") else "bf16"), gpus))
        for n in (2, 4, 8, 16, 32, 64, 128, 256):
            if n > gpus:
                out.append(("gpus", f"shard across {n} GPUs with FSDP/ZeRO-3 ({{gpus}} {n} {{sharding}} fsdp)",
                            w.derive(sharding="fsdp", gpus=n), n))
    else:
        order = [p for p in ("fp8", "int8", "int4") if p != w.precision]
        if w.precision == "fp32":
            order = [p for p in ("bf16", "fp16") if acc.supports(p)][:1] + order
        for p in order:
            if _bytes_rank(p) < _bytes_rank(w.precision) and precision_support(p, acc)[0]:
                label = {"fp8": "fp8 weights", "int8": "int8 weight quantization",
                         "int4": "int4 weight quantization (GPTQ/AWQ)"}.get(p, f"{p} weights")
                out.append(("precision", f"use {label} ({{precision}} {p})", w.derive(precision=p), gpus))
        for n in (2, 4, 8, 16):
            if n > gpus:
                out.append(("gpus", f"tensor-parallel across {n} GPUs ({{gpus}} {n} {{sharding}} tensor)",
                            w.derive(sharding="tensor", gpus=n), n))
    b = w.batch // 2
    while b >= 1:
        out.append(("batch", f"reduce the batch to {b} ({{batch}} {b})", w.derive(batch=b), gpus))
        b //= 2
    if w.seq_len and w.seq_len > 512:
        s = w.seq_len // 2
        while s >= 256:
            out.append(("seq_len", f"shorten sequences to {s} tokens ({{seq_len}} {s})", w.derive(seq_len=s), gpus))
            s //= 2
    return out


def _bytes_rank(p: str) -> float:
    return cal.WEIGHT_BYTES.get(p, 2.0)


def suggest_fixes(w: Workload, gpus: int, acc: Accelerator, limit: int = 6) -> list[FitSuggestion]:
    """Up to ``limit`` single (or paired) changes that make ``w`` fit, each verified by re-estimating."""
    cap = capacity_bytes(acc)
    cands = _candidates(w, gpus, acc)
    found: list[FitSuggestion] = []
    seen: set[str] = set()

    def consider(change: str, desc: str, w2: Workload, n: int) -> bool:
        if change in seen:
            return False
        try:
            total = estimate_memory(w2, n).total_bytes
        except ValueError:
            return False
        if total <= cap:
            seen.add(change)
            found.append(FitSuggestion(desc, w2, total, n, change))
            return True
        return False

    for change, desc, w2, n in cands:  # first fitting option of each kind (smallest change)
        consider(change, desc, w2, n)
    # No single change fits, or only buying more GPUs does: pair checkpointing with the others
    # (checkpointing + a smaller batch often fits the hardware the user already has).
    if w.is_training and all(f.change == "gpus" for f in found):
        base = w.derive(grad_checkpointing=True) if not w.grad_checkpointing else w
        for change, desc, w2, n in _candidates(base, gpus, acc):
            if change == "checkpointing":
                continue
            w3 = w2.derive(grad_checkpointing=True)
            prefix = "" if w.grad_checkpointing else "turn on activation checkpointing and "
            consider("checkpointing+" + change, prefix + desc, w3, n)
    if not w.is_training and "precision" not in seen:  # quantize and split: fewest GPUs per format
        for change, desc, w2, n in cands:
            if change != "precision":
                continue
            for m in (2, 4, 8, 16):
                if m > gpus and consider(f"gpus+{w2.precision}",
                                         f"{desc.split(' ({')[0]} on {m} GPUs ({{precision}} {w2.precision} "
                                         f"{{gpus}} {m} {{sharding}} tensor)",
                                         w2.derive(sharding="tensor", gpus=m), m):
                    break
    order = {"precision": 0, "checkpointing": 1, "optimizer": 2, "master_weights": 3, "lora": 4,
             "qlora": 5, "gpus": 6, "batch": 7, "seq_len": 8}
    found.sort(key=lambda s: (order.get(s.change.split("+")[-1], order.get(s.change.split("+")[0], 9)),
                              s.gpus, s.total_bytes))
    return found[:limit]


_FITS = caches.memo("sizing.fit", 8192)


def check_fit(workload: Workload, accelerator: Accelerator, gpus: int | None = None) -> FitResult:
    """Does ``workload`` fit on ``gpus`` × ``accelerator``? If not, what smallest changes make it fit."""
    n = int(gpus or workload.gpus)
    return _FITS.get_or_compute((workload, caches.ValueKey(accelerator, accelerator.id), n),
                                lambda: _check_fit(workload, accelerator, n))


def _check_fit(workload: Workload, accelerator: Accelerator, n: int) -> FitResult:
    mem = estimate_memory(workload, n)
    cap = capacity_bytes(accelerator)
    fits = mem.total_bytes <= cap
    supported, msg = precision_support(workload.precision, accelerator)
    if fits:
        message = (f"uses {mem.total_bytes / cal.GiB:.1f} of {cap / cal.GiB:.1f} GiB per GPU "
                   f"({(cap - mem.total_bytes) / cal.GiB:.1f} GiB free)")
    else:
        message = (f"needs {mem.total_bytes / cal.GiB:.1f} GiB per GPU, "
                   f"{accelerator.id} has {cap / cal.GiB:.1f} GiB usable")
    if msg:  # an error when refused, a note when support is undocumented
        message = msg + "; " + message
    return FitResult(fits=fits, memory=mem, capacity_bytes=cap, headroom_bytes=cap - mem.total_bytes,
                     accelerator=accelerator.id, gpus=n, precision_supported=supported, message=message,
                     precision_note=msg if supported else "", workload=workload, device=accelerator)
