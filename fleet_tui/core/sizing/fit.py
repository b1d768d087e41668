"""Whether a workload fits an accelerator, and the smallest changes that make it fit.

Capacity is the device's nominal memory less what NVML never reports (about 1 %,
:data:`calibration.USABLE_MEMORY_FRACTION`, in :mod:`.device_support`). A misfit is answered by
searching its neighbourhood — another parallel layout on the same devices (:mod:`.layout`),
micro-batches with gradient accumulation (same global batch), checkpointing, offload to CPU memory
(activations; optimizer states and step, ZeRO-Offload; then the parameters too, ZeRO-Infinity /
FSDP CPU offload: :mod:`.stacks`), 8-bit optimizer
states, pure 16-bit weights, LoRA/QLoRA, quantized weights or KV cache, the fewest devices of the
same kind with the layout that fits them, shorter sequences, a smaller batch — each verified by
re-running :func:`.memory.estimate_memory`, and ordered by what it costs the user
(:data:`COST_TIERS`: same hardware and same maths first, then changed maths, then dollars, then a
smaller problem). When checkpointing alone does not make a training run fit, it is paired with
the others. A suggestion names the
inputs it changes as ``{field}`` placeholders (argparse dests): the CLI shows them as flags, the
builder as its form labels.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property

from fleet_tui.core import caches
from fleet_tui.core import calibration as cal
from fleet_tui.core.choices import OFFLOAD_TARGETS
from fleet_tui.core.errors import render_fields
from fleet_tui.core.footprint import layout_is_set, parallel_layout
from fleet_tui.core.records import record
from fleet_tui.core.sizing.device_support import capacity_bytes, precision_support, workload_unsupported
from fleet_tui.core.sizing.kv_pool import serves_with_engine
from fleet_tui.core.sizing.memory import MemoryBreakdown, estimate_memory
from fleet_tui.core.specs import Accelerator
from fleet_tui.core.workload import Workload

#: The input fields that set a parallel layout (``layout_flags`` writes them).
LAYOUT_FIELDS = ("sharding", "tp", "pp", "zero", "cp", "vpp", "micro_batch")


@record
class FitSuggestion:
    """One change that makes the workload fit, verified by sizing it again."""

    template: str  # e.g. "use 8-bit AdamW ({optimizer} adamw8bit)": each {name} is an input field
    workload: Workload
    total_bytes: int
    gpus: int
    change: str = ""  # short key: "precision", "checkpointing", "optimizer", "gpus", "batch", "lora"...

    def render(self, label: Callable[[str], str]) -> str:
        """The sentence with each input field shown as ``label(field)`` (a flag, a form label)."""
        return render_fields(self.template, label)

    def render_form(self, label: Callable[[str], str], fields: Iterable[str]) -> str:
        """The sentence for a form whose input fields are ``fields``: when it lacks a layout flag
        the sentence sets (``{tp} 2``, ``{pp} 2``, ``{zero} 1``...), the layout flags are left out
        and the form's sharding is left on auto instead, which chooses that layout for the devices
        (``plan.build``)."""
        have = set(fields)
        pair = re.compile(r"\{(" + "|".join(LAYOUT_FIELDS) + r")\} [^\s{}()]+")
        if all(m.group(1) in have for m in pair.finditer(self.template)) or "sharding" not in have:
            return self.render(label)
        first = True

        def auto(_m: re.Match[str]) -> str:
            nonlocal first
            out, first = ("{sharding} auto" if first else ""), False
            return out

        template = re.sub(r" +", " ", pair.sub(auto, self.template)).replace(" )", ")")
        return render_fields(template, label)

    @property
    def description(self) -> str:
        return self.render(lambda name: name)


@dataclass(frozen=True)
class FitResult:
    """The fit verdict of a workload on ``gpus`` × one accelerator, with its memory and fixes."""

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


#: What a change costs the user, cheapest first: the same hardware computing the same thing (a
#: layout, micro-batches, recomputation), the same hardware computing something slightly
#: different (8-bit states, adapters, quantized weights), more devices (dollars), and last a
#: smaller problem (shorter sequences, a smaller global batch).
#: Offloading keeps the maths and the devices (it costs host RAM and PCIe time per step), so it
#: ranks with the layout and recomputation, after them.
# Same-hardware maths changes that keep the step on the device (8-bit Adam states, pure bf16) come
# before offload, which moves state over PCIe every step; adapters and quantization change the job
COST_TIERS = {
    "layout": 0, "micro_batch": 0, "checkpointing": 0,
    "engine_memory": 0, "engine_chunk": 0,
    "optimizer": 1, "master_weights": 1,
    "offload_activations": 2, "offload": 2, "offload_params": 2,
    "lora": 3, "qlora": 3, "precision": 3, "kv_cache_dtype": 1,
    "gpus": 4, "device": 4, "seq_len": 5, "batch": 5,
}
_ORDER_IN_TIER = ("layout", "engine_chunk", "engine_memory", "micro_batch", "checkpointing",
                  "kv_cache_dtype", "optimizer", "master_weights", "offload_activations", "offload", "offload_params",
                  "precision", "qlora", "lora", "gpus", "seq_len", "batch")
#: Changes not tried under another layout of the same devices when they do not fit under the
#: user's: a layout is its own change (its search tries micro-batches), and a smaller problem is
#: not the same job.
_RELAYOUT_SKIP = frozenset({"layout", "micro_batch", "batch", "seq_len"})
#: Devices per node assumed when the caller does not know the instance (HGX/DGX-class boards).
DEFAULT_NODE_DEVICES = 8
#: Most devices a "more devices" suggestion considers (powers of two).
MAX_SUGGESTED_DEVICES = 1024


def layout_flags(w: Workload, gpus: int) -> str:
    """The flags that set ``w``'s layout on ``gpus`` devices, as ``{field} value`` placeholders."""
    lay = parallel_layout(w, gpus)
    parts = [f"{{gpus}} {gpus}"]
    if lay.tp == 1 and lay.pp == 1:
        parts.append("{sharding} fsdp" if lay.zero == 3
                     else (f"{{zero}} {lay.zero}" if lay.zero else "{sharding} data"))
    else:
        parts += ([f"{{tp}} {lay.tp}"] if lay.tp > 1 else []) + ([f"{{pp}} {lay.pp}"] if lay.pp > 1 else [])
        if w.is_training and lay.dp > 1:
            parts.append(f"{{zero}} {lay.zero}")
    if lay.cp > 1:
        parts.append(f"{{cp}} {lay.cp}")
    if lay.vpp > 1:
        parts.append(f"{{vpp}} {lay.vpp}")
    if w.micro_batch:
        parts.append(f"{{micro_batch}} {w.micro_batch}")
    return " ".join(parts)


def _layout_words(w: Workload, gpus: int) -> str:
    lay = parallel_layout(w, gpus)
    if lay.tp == 1 and lay.pp == 1 and lay.zero == 3:
        words = "FSDP (ZeRO-3)"
    else:
        words = lay.label()
    if w.micro_batch and w.micro_batch < -(-w.batch // lay.dp):
        words += f", micro-batch {w.micro_batch} with gradient accumulation"
    return words


def _layout_free(w: Workload) -> Workload:
    """``w`` with any layout the user set (TP, PP, ZeRO) cleared, for a layout search."""
    return w.derive(tp=None, pp=None, zero=None, cp=1, vpp=1) if layout_is_set(w) else w


def _with_offload(w: Workload, *targets: str) -> Workload:
    kept = set(w.offload) | set(targets)
    return w.derive(offload=tuple(t for t in OFFLOAD_TARGETS if t in kept))


def _offload_candidates(w: Workload, gpus: int) -> list[tuple[str, str, Workload, int]]:
    """Training state kept in CPU memory (:mod:`.stacks`): activations, then the optimizer, then
    the parameters as well; each named by the ``{offload}`` value that sets it."""
    out = []
    if "activations" not in w.offload:
        v = _with_offload(w, "activations")
        out.append(("offload_activations", "offload saved activations to CPU memory ({offload} "
                    f"{','.join(v.offload)}; PCIe traffic each step)", v, gpus))
    if "optimizer" not in w.offload and w.optimizer not in ("sgd",):
        v = _with_offload(w, "optimizer")
        out.append(("offload", "keep optimizer states and the step in CPU memory, ZeRO-Offload "
                    f"({{offload}} {','.join(v.offload)}; slower steps, needs host RAM)", v, gpus))
    if "params" not in w.offload:
        v = _with_offload(w, "optimizer", "params")
        out.append(("offload_params", "keep parameters and optimizer states in CPU memory, two layers "
                    f"at a time on the GPU ({{offload}} {','.join(v.offload)}; much slower steps)", v, gpus))
    return out


def _candidates(w: Workload, gpus: int, acc: Accelerator, node: int) -> list[tuple[str, str, Workload, int]]:
    """Single changes of ``w`` on ``gpus`` × ``acc``: (change key, description, workload, gpus)."""
    from fleet_tui.core.sizing.layout import choose_layout  # the fix search only

    out: list[tuple[str, str, Workload, int]] = []
    # the same devices, another layout (searched; a layout the user set is left alone)
    if gpus > 1:  # the layout searched afresh (also when the user set one that does not fit)
        ch = choose_layout(_layout_free(w), acc, gpus, min(gpus, node))
        if ch.fits:
            out.append(("layout", f"fits with {_layout_words(ch.workload, gpus)} on these {gpus} devices "
                        f"({layout_flags(ch.workload, gpus)})", ch.workload, gpus))
    if w.is_training:
        per_rank = -(-w.batch // parallel_layout(w, gpus).dp)
        m = per_rank // 2
        while m >= 1:  # same global batch, fewer sequences per forward: gradient accumulation
            v = w.derive(micro_batch=m)
            out.append(("micro_batch", f"micro-batches of {m} with gradient accumulation, same global batch "
                        f"({{micro_batch}} {m})", v, gpus))
            m //= 2
        if not w.grad_checkpointing:
            out.append(("checkpointing", "turn on activation checkpointing ({grad_checkpointing}; "
                        "~25-30 % slower steps)", w.derive(grad_checkpointing=True), gpus))
        out += _offload_candidates(w, gpus)
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
    else:
        if serves_with_engine(w):
            out += _engine_candidates(w, gpus)
        if "kv_cache_dtype" in Workload.model_fields and w.is_generation:
            current = getattr(w, "kv_cache_dtype", "auto")
            if current not in ("fp8", "int8") and precision_support("fp8", acc)[0]:
                out.append(("kv_cache_dtype", "keep the KV cache in fp8 ({kv_cache_dtype} fp8)",
                            w.derive(kv_cache_dtype="fp8"), gpus))
        order = [p for p in ("fp8", "int8", "int4") if p != w.precision]
        if w.precision == "fp32":
            order = [p for p in ("bf16", "fp16") if acc.supports(p)][:1] + order
        for p in order:
            if _bytes_rank(p) < _bytes_rank(w.precision) and precision_support(p, acc, w)[0]:
                label = {"fp8": "fp8 weights", "int8": "int8 weight quantization",
                         "int4": "int4 weight quantization (GPTQ/AWQ)"}.get(p, f"{p} weights")
                out.append(("precision", f"use {label} ({{precision}} {p})", w.derive(precision=p), gpus))
    b = w.batch // 2
    while b >= 1:
        v = w.derive(batch=b, micro_batch=min(w.micro_batch, b) if w.micro_batch else None)
        out.append(("batch", f"reduce the global batch to {b} ({{batch}} {b})", v, gpus))
        b //= 2
    if w.seq_len and w.seq_len > 512:
        s = w.seq_len // 2
        while s >= 256:
            out.append(("seq_len", f"shorten sequences to {s} tokens ({{seq_len}} {s})", w.derive(seq_len=s), gpus))
            s //= 2
    return out


#: The largest memory share a fix suggests for a serving engine: vLLM's docs raise it to 0.95 when
#: the KV cache is short; above that the driver and other processes run out (CUDA OOM at start).
MAX_SUGGESTED_UTILIZATION = 0.95
#: The smallest chunk a fix suggests (vLLM's default on GPUs under 70 GiB: 2048 tokens a step).
MIN_SUGGESTED_CHUNK = 2048


def _engine_candidates(w: Workload, gpus: int) -> list[tuple[str, str, Workload, int]]:
    """A serving engine's own knobs: a larger memory share, a smaller profile-run chunk."""
    from fleet_tui.core.perf.engines import engine_profile

    e = engine_profile(w)
    out = []
    util = w.gpu_memory_utilization or e.memory_utilization
    if util < MAX_SUGGESTED_UTILIZATION:
        out.append(("engine_memory", f"let {e.id} use {MAX_SUGGESTED_UTILIZATION:g} of device memory "
                    f"({{gpu_memory_utilization}} {MAX_SUGGESTED_UTILIZATION:g})",
                    w.derive(gpu_memory_utilization=MAX_SUGGESTED_UTILIZATION), gpus))
    chunk = w.max_num_batched_tokens or e.batched_tokens
    if chunk > MIN_SUGGESTED_CHUNK:
        out.append(("engine_chunk", f"prefill in chunks of {MIN_SUGGESTED_CHUNK} tokens a step "
                    f"({{max_num_batched_tokens}} {MIN_SUGGESTED_CHUNK}; a smaller profile-run peak)",
                    w.derive(max_num_batched_tokens=MIN_SUGGESTED_CHUNK), gpus))
    return out


def _more_devices(w: Workload, gpus: int, acc: Accelerator, node: int) -> FitSuggestion | None:
    """The fewest devices of the same kind (powers of two) on which some layout fits."""
    from fleet_tui.core.sizing.layout import choose_layout  # the fix search only

    base = _layout_free(w)
    n = 2
    while n <= MAX_SUGGESTED_DEVICES:
        if n > gpus:
            ch = choose_layout(base, acc, n, node)
            if ch.fits:
                return FitSuggestion(f"use {n}× {acc.id} as {_layout_words(ch.workload, n)} "
                                     f"({layout_flags(ch.workload, n)})", ch.workload, ch.total_bytes, n, "gpus")
        n *= 2
    return None


def bigger_devices(w: Workload, gpus: int, acc: Accelerator, devices, limit: int = 2) -> list[FitSuggestion]:
    """Up to ``limit`` catalog ``devices`` with more memory than ``acc`` (smallest first) on which
    ``w`` fits on the same number of devices, its layout searched; each verified by re-sizing."""
    from fleet_tui.core.sizing.layout import choose_layout  # the fix search only

    base = _layout_free(w)
    out: list[FitSuggestion] = []
    for a in sorted((d for d in devices if d.memory_gib > acc.memory_gib), key=lambda d: (d.memory_gib, d.id)):
        if not precision_support(w.precision, a, w)[0]:
            continue
        ch = choose_layout(base, a, gpus, min(max(gpus, 1), DEFAULT_NODE_DEVICES))
        if ch.fits:
            words = f" as {_layout_words(ch.workload, gpus)}" if gpus > 1 else ""
            flags = f" {layout_flags(ch.workload, gpus)}" if gpus > 1 else ""
            out.append(FitSuggestion(f"use {gpus}× {a.id} ({a.memory_gib:g} GiB each){words} ({{gpu}} {a.id}{flags})",
                                     ch.workload, ch.total_bytes, gpus, "device"))
            if len(out) >= limit:
                break
    return out


def _bytes_rank(p: str) -> float:
    return cal.WEIGHT_BYTES.get(p, 2.0)


def _words_and_flags(template: str) -> tuple[str, str]:
    """``"use 8-bit AdamW ({optimizer} adamw8bit; note)"`` -> (``"use 8-bit AdamW"``, ``"{optimizer} adamw8bit"``)."""
    words, _, rest = template.rpartition(" (")
    return words, rest.rstrip(")").split(";")[0]


def _changed_and_more_devices(w: Workload, gpus: int, acc: Accelerator, node: int) -> list[FitSuggestion]:
    """The fewest devices of the same kind once one change is made (checkpointing on for training):
    the last resort, so that a setup that exists is always named."""
    base = w.derive(grad_checkpointing=True) if w.is_training and not w.grad_checkpointing else w
    prefix = "turn on activation checkpointing ({grad_checkpointing}), " if base is not w else ""
    best: FitSuggestion | None = None
    for change, desc, w2, _n in _candidates(base, gpus, acc, node):
        if change in ("layout", "micro_batch", "checkpointing", "batch", "seq_len"):
            continue  # a layout is searched by _more_devices; a smaller problem is not the same job
        alt = _more_devices(w2, gpus, acc, node)
        if alt is not None and (best is None or alt.gpus < best.gpus):
            words, flags = _words_and_flags(desc)
            more_words, more_flags = _words_and_flags(alt.template)
            best = FitSuggestion(f"{prefix}{words} and {more_words} ({flags} {more_flags})",
                                 alt.workload, alt.total_bytes, alt.gpus, f"gpus+{change}")
    return [best] if best is not None else []


def suggest_fixes(w: Workload, gpus: int, acc: Accelerator, limit: int = 6,
                  node_devices: int | None = None) -> list[FitSuggestion]:
    """Up to ``limit`` changes that make ``w`` fit on ``gpus`` × ``acc``, each verified by
    re-estimating, cheapest for the user first (:data:`COST_TIERS`): the first fitting option of
    each kind; checkpointing paired with the others when it does not fit alone; and
    the fewest devices of the same kind with the layout that fits them."""
    from fleet_tui.core.sizing.layout import choose_layout  # the fix search only

    cap = capacity_bytes(acc)
    node = node_devices or DEFAULT_NODE_DEVICES
    found: list[FitSuggestion] = []
    seen: set[str] = set()

    def consider(change: str, desc: str, w2: Workload, n: int) -> bool:
        if change in seen or workload_unsupported(w2, acc) is not None:
            return False  # never a change the device's software stack cannot run (capabilities.toml)
        try:
            total = estimate_memory(w2, n).total_bytes
        except ValueError:
            return False
        if total <= cap:
            seen.add(change)
            found.append(FitSuggestion(desc, w2, total, n, change))
            return True
        # the change may fit these devices split another way (70B QLoRA with checkpointing on 2x
        # L40S: 58 GiB a device as two data-parallel copies, 42 GiB as FSDP); not searched when
        # another layout fits alone, nor for a pair whose part fits alone (with or without another
        # layout): they would say nothing more
        keys = change.split("+")
        if n > 1 and "layout" not in seen and not _RELAYOUT_SKIP.intersection(keys) and not any(
                k in seen or k + "+layout" in seen for k in keys if k != change):
            ch = choose_layout(_layout_free(w2), acc, n, min(n, node))
            if ch.fits and ch.workload != w2 and change + "+layout" not in seen:
                words, flags = _words_and_flags(desc)
                seen.add(change + "+layout")  # as it is it still does not fit: pairs are still tried
                found.append(FitSuggestion(f"{words}, as {_layout_words(ch.workload, n)} on these {n} devices "
                                           f"({flags} {layout_flags(ch.workload, n)})", ch.workload,
                                           ch.total_bytes, n, change + "+layout"))
                return True
        return False

    for change, desc, w2, n in _candidates(w, gpus, acc, node):
        consider(change, desc, w2, n)
    if w.is_training and "checkpointing" not in seen:
        # checkpointing alone is not enough (or is on already): pair it with the others. Also
        # when something else fits alone: 70B QLoRA on 2x L40S fits alone only by offloading
        # every saved activation over PCIe, and with checkpointing and TP2 on the same two.
        base = w.derive(grad_checkpointing=True) if not w.grad_checkpointing else w
        prefix = "" if w.grad_checkpointing else "turn on activation checkpointing ({grad_checkpointing}) and "
        for change, desc, w2, n in _candidates(base, gpus, acc, node):
            if change != "checkpointing":
                consider("checkpointing+" + change, prefix + desc, w2.derive(grad_checkpointing=True), n)
    more = _more_devices(w, gpus, acc, node)
    if more is not None and "gpus" not in seen:
        found.append(more)
    if not w.is_training and "precision" not in seen:  # quantize and split: fewest devices per format
        for change, desc, w2, _n in _candidates(w, gpus, acc, node):
            if change == "precision":
                alt = _more_devices(w2, gpus, acc, node)
                if alt is not None and (more is None or alt.gpus < more.gpus):
                    found.append(FitSuggestion(f"{desc.split(' ({')[0]} and {alt.description.split(' (')[0]} "
                                               f"({{precision}} {w2.precision} {layout_flags(alt.workload, alt.gpus)})",
                                               alt.workload, alt.total_bytes, alt.gpus, f"gpus+{w2.precision}"))
                    break

    if not found:  # nothing alone, not even the most devices: a change of maths and more devices
        found.extend(_changed_and_more_devices(w, gpus, acc, node))

    def cost(s: FitSuggestion):
        keys = s.change.split("+")
        tier = max(COST_TIERS.get(k, 9) for k in keys)
        # within a tier, by the dearest part: checkpointing and a layout before checkpointing and
        # offloading, offloading activations and a layout before offloading parameters
        dearest = max(_ORDER_IN_TIER.index(k) if k in _ORDER_IN_TIER else 99 for k in keys)
        return (tier, len(keys), s.gpus, dearest, s.total_bytes)

    found.sort(key=cost)
    return distinct_by_effect(found)[:limit]


def distinct_by_effect(fixes: list[FitSuggestion]) -> list[FitSuggestion]:
    """``fixes`` in their order, each effect once: two changes that leave the same workload on the
    same devices (checkpointing "paired" with a change when it is on already) are one fix, the
    first kept. A larger device is its own effect (same workload, another accelerator)."""
    seen: set[tuple] = set()
    out: list[FitSuggestion] = []
    for s in fixes:
        key = (s.workload, s.gpus, s.template if s.change == "device" else "")
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


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
    supported, msg = precision_support(workload.precision, accelerator, workload)
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
