"""Workload builder pane: a form, a live memory breakdown per component, the fit verdict against the
chosen accelerator and the changes that would make it fit.

Every keystroke starts an ``exclusive`` thread worker (the previous one is superseded and its result
dropped), so typing never waits for sizing. The workload built here is published on
``app.workload`` for the Recommendations pane.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, VerticalScroll
from textual.markup import escape
from textual.widgets import Checkbox, Input, Select, Static

from fleet_tui.core.choices import ENGINES, FRAMEWORKS, KINDS, KV_CACHE_DTYPES, OPTIMIZERS, PRECISIONS, SHARDINGS
from fleet_tui.core.records import record
from fleet_tui.ui.pane import PaneScreen
from fleet_tui.ui.state import BuilderChoice
from fleet_tui.ui.widgets.form import Check, Field
from fleet_tui.ui.widgets.gauges import usd
from fleet_tui.ui.widgets.memory_bar import memory_bar_markup
from fleet_tui.ui.widgets.text import update_text

if TYPE_CHECKING:  # for the checker only: the core's planning loads in the sizing worker
    from textual.content import Content

    from fleet_tui.core.catalog.models import Catalog
    from fleet_tui.core.catalog.setup_cost import SetupCost
    from fleet_tui.core.perf.serving_plan import ServingPlan
    from fleet_tui.core.perf.throughput import Throughput
    from fleet_tui.core.plan import PlanRequest
    from fleet_tui.core.plan.report import PlanReport
    from fleet_tui.core.workload import Workload

#: The form's label of each core workload field (a core ``FieldError`` names fields; shown with these).
LABELS = {
    "workload": "workload", "model": "model preset", "params": "params (e.g. 7B)",
    "model_config": "config.json path", "precision": "precision", "batch": "batch",
    "seq_len": "seq/prompt len", "prompt_len": "seq/prompt len", "gen_len": "gen len (infer)",
    "optimizer": "optimizer", "gpus": "devices", "sharding": "sharding", "lora_rank": "LoRA rank",
    "grad_checkpointing": "checkpointing", "master_weights": "master weights",
    "engine": "engine (infer)", "kv_cache_dtype": "KV cache dtype", "framework": "framework (train)",
    "rate": "demand req/s", "ttft_ms": "TTFT ms", "tpot_ms": "TPOT ms", "slo_percentile": "at percentile",
    "tokens_per_s": "demand req/s", "gpu": "accelerator",
}


def label(field: str) -> str:
    """How a sentence names a field: its form label without the hint ("params (e.g. 7B)" -> "params")."""
    return LABELS.get(field, field).split(" (")[0]


@record
class BuilderResult:
    workload: Workload | None
    choice: BuilderChoice
    markup: str  # breakdown + verdict, ready to show
    report: PlanReport | None = None  # the core's plan the markup lays out
    error: str | None = None
    content: Content | None = None  # ``markup`` parsed in the worker
    error_field: str | None = None  # the core field the error is about (its input is marked)


#: input id of each core field, to mark the one an error is about
FIELD_INPUTS = {"params": "b-params", "model_config": "b-config", "batch": "b-batch",
                "seq_len": "b-seq", "prompt_len": "b-seq", "gen_len": "b-gen", "gpus": "b-gpus",
                "lora_rank": "b-lora-rank", "hours": "b-hours", "current": "b-current",
                "rate": "b-rate", "ttft_ms": "b-ttft", "tpot_ms": "b-tpot"}
REQUIRED = ("batch", "gpus")  # empty is an error, not the default (it was sized as batch 1)


class BuilderScreen(PaneScreen):
    MODE = "builder"
    # Opens on the results (verdict first), scrollable with the arrow keys; / edits the form.
    AUTO_FOCUS = "#b-result"
    BINDINGS = [
        Binding("slash", "edit_form", "Edit form", key_display="/"),
        Binding("escape", "leave_field", "Leave field"),
        Binding("ctrl+r", "recommend", "Recommend for this", priority=True),
        Binding("pagedown", "scroll_result(1)", "Scroll results", show=False),
        Binding("pageup", "scroll_result(-1)", "Scroll results up", show=False),
    ]
    DEFAULT_CSS = """
    BuilderScreen #b-form { grid-size: 6; grid-rows: 2; height: auto; padding: 0 1; }
    BuilderScreen #b-form.-narrow { grid-size: 5; }
    BuilderScreen #b-result { height: 1fr; border: round $pane-border; padding: 0 1; }
    BuilderScreen #b-result:focus { border: heavy $primary; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._generation = 0
        self.last_result: BuilderResult | None = None

    def compose_body(self) -> ComposeResult:
        def sel(options, value, id_, blank=False, prompt="any"):
            return Select([(o, o) for o in options], value=value, allow_blank=blank, id=id_,
                          compact=True, prompt=prompt)

        with Grid(id="b-form"):
            yield Field(LABELS["workload"], sel(KINDS, "inference", "b-kind"))
            yield Field(LABELS["model"], Select([], prompt="(custom)", id="b-model", compact=True))
            yield Field(LABELS["params"], Input(placeholder="or a preset", id="b-params",
                                                 compact=True))
            yield Field(LABELS["model_config"], Input(placeholder="optional", id="b-config", compact=True))
            yield Field(LABELS["precision"], sel(PRECISIONS, "bf16", "b-precision"))
            yield Field(LABELS["gpu"], Select([], prompt="(best)", id="b-accel", compact=True))
            yield Field(LABELS["batch"], Input("1", id="b-batch", compact=True))
            yield Field(LABELS["seq_len"], Input("2048", id="b-seq", compact=True))
            yield Field(LABELS["gen_len"], Input("256", id="b-gen", compact=True))
            yield Field(LABELS["optimizer"], sel(OPTIMIZERS, "adamw", "b-optimizer"))
            yield Field(LABELS["gpus"], Input("1", id="b-gpus", compact=True))
            yield Field(LABELS["sharding"], sel(("auto",) + SHARDINGS, "auto", "b-sharding"))
            yield Field(LABELS["lora_rank"], Input("16", id="b-lora-rank", compact=True))
            yield Field("hours/month", Input("730", id="b-hours", type="number", compact=True))
            yield Field("current instance", Input(placeholder="e.g. p4d.24xlarge", id="b-current",
                                                  compact=True))
            yield Field(LABELS["grad_checkpointing"], Check("grad ckpt", id="b-ckpt", compact=True))
            yield Field("spot", Check("spot allowed", id="b-spot", compact=True))
            yield Field(LABELS["engine"], sel(ENGINES, "vllm", "b-engine"))
            yield Field(LABELS["kv_cache_dtype"], sel(KV_CACHE_DTYPES, "auto", "b-kv-dtype"))
            yield Field(LABELS["framework"], sel(FRAMEWORKS, "hf", "b-framework"))
            yield Field(LABELS["rate"], Input(placeholder="plan", id="b-rate", type="number", compact=True))
            yield Field(LABELS["ttft_ms"], Input(placeholder="target", id="b-ttft", type="number", compact=True))
            yield Field(LABELS["tpot_ms"], Input(placeholder="target", id="b-tpot", type="number", compact=True))
            yield Field(LABELS["slo_percentile"], sel(("p50", "p90", "p95", "p99"), "p95", "b-pct"))
        yield VerticalScroll(Static("Choose a model preset or type a parameter count.",
                                    id="b-result-text"), id="b-result")

    def on_mount(self) -> None:
        self.query_one("#b-result").border_title = "Memory and fit"
        self.watch(self.app, "catalog", self._catalog_changed)
        self.query_one("#b-form").set_class(self.size.width < 100, "-narrow")
        if self.app.instance_type:
            self.query_one("#b-current", Input).value = self.app.instance_type

    def on_resize(self, event) -> None:
        self.query_one("#b-form").set_class(event.size.width < 100, "-narrow")

    def _catalog_changed(self, catalog) -> None:
        if catalog is None:
            return
        models = sorted(catalog.models.values(), key=lambda m: m.id)
        accels = sorted(catalog.accelerators.values(), key=lambda a: a.id)
        with self.prevent(Select.Changed):
            self.query_one("#b-model", Select).set_options(
                (m.name or m.id, m.id) for m in models)
            self.query_one("#b-accel", Select).set_options(
                (f"{a.id} ({a.memory_gib:g} GiB)", a.id) for a in accels)
        self.recompute()

    @on(Input.Changed)
    @on(Select.Changed)
    @on(Checkbox.Changed)
    def _changed(self, event) -> None:
        event.stop()
        self.recompute()

    def form(self) -> dict:
        """The raw form values (strings/bools); parsing happens in the worker."""
        values = {}
        for widget in self.query("#b-form Input").results(Input):
            values[widget.id] = widget.value
        for widget in self.query("#b-form Select").results(Select):
            values[widget.id] = None if widget.value is Select.NULL else widget.value
        for widget in self.query("#b-form Checkbox").results(Checkbox):
            values[widget.id] = widget.value
        return values

    def recompute(self) -> None:
        self._generation += 1
        self._size_in_worker(self.app.catalog, self.form(), self._generation)

    @work(thread=True, exclusive=True, group="builder-size", exit_on_error=False)
    def _size_in_worker(self, catalog: Catalog | None, form: dict, generation: int) -> None:
        result = compute(catalog, form)
        if result.markup:  # parse here, not on the event loop
            from dataclasses import replace

            from textual.content import Content

            result = replace(result, content=Content.from_markup(result.markup))
        self.app.call_from_thread(self._show, result, generation)

    def _show(self, result: BuilderResult, generation: int) -> None:
        if generation != self._generation:
            return  # superseded by a newer keystroke
        self.last_result = result
        text = self.query_one("#b-result-text", Static)
        for field_id in set(FIELD_INPUTS.values()):
            self.query_one(f"#{field_id}", Input).set_class(
                FIELD_INPUTS.get(result.error_field or "") == field_id, "-invalid")
        if result.error:
            update_text(text, f"[$error]{escape(result.error)}[/]", reserve=True)
            return
        update_text(text, result.markup, reserve=True, content=result.content)
        self.query_one("#b-result", VerticalScroll).scroll_home(animate=False)  # the new verdict in view
        self.app.builder_context = result.choice
        if result.workload is not None and result.workload != self.app.workload:
            self.app.workload = result.workload

    def action_edit_form(self) -> None:
        self.query_one("#b-params", Input).focus()

    def action_leave_field(self) -> None:
        self.query_one("#b-result").focus()  # the results, scrollable with the arrow keys

    def action_scroll_result(self, direction: int) -> None:
        (self.query_one("#b-result", VerticalScroll).scroll_page_down if direction > 0 else
         self.query_one("#b-result", VerticalScroll).scroll_page_up)(animate=False)

    async def action_recommend(self) -> None:
        await self.app.run_action("switch_mode('recommend')")


def workload_fields(form: dict) -> dict:
    """The form's values as the core's workload fields (the names :func:`parse_workload` reads)."""
    def text(key: str) -> str | None:
        return (form.get(key) or "").strip() or None

    kind = form.get("b-kind") or "inference"
    training, adapter = kind != "inference", kind in ("lora", "qlora")
    sharding = form.get("b-sharding")
    fields: dict = dict(workload=kind, precision=form.get("b-precision"), batch=text("b-batch"),
                        gpus=text("b-gpus"), sharding=None if sharding == "auto" else sharding)
    if text("b-config"):  # the path typed wins over the preset, the preset over a count
        fields["model_config"] = text("b-config")
    elif form.get("b-model"):
        fields["model"] = form["b-model"]
    else:
        fields["params"] = text("b-params")
    if kind == "inference" and text("b-gen"):
        fields.update(prompt_len=text("b-seq"), gen_len=text("b-gen"))
    else:
        fields["seq_len"] = text("b-seq")
    if training:
        fields.update(optimizer=form.get("b-optimizer"), grad_checkpointing=bool(form.get("b-ckpt")),
                      framework=form.get("b-framework"))
    else:
        fields.update(engine=form.get("b-engine"), kv_cache_dtype=form.get("b-kv-dtype"))
    if adapter:
        fields["lora_rank"] = text("b-lora-rank")
    return fields


def build_workload(catalog: Catalog | None, form: dict) -> Workload:
    """The core ``Workload`` for the form (the CLI's parser), or raise ``UserError`` with a sentence."""
    from fleet_tui.core.errors import FieldError, escape_braces
    from fleet_tui.core.workload import parse_workload

    fields = workload_fields(form)
    if not any(fields.get(k) for k in ("model_config", "model", "params")):
        raise ValueError("Choose a model preset, a config.json path or type a parameter count.")
    for name in REQUIRED:  # a form without the input (a script's partial form) takes the default
        if FIELD_INPUTS[name] in form and fields.get(name) is None:
            raise FieldError(name, f"{{{name}}} is empty: type a whole number (1 or more)")
    try:
        return parse_workload(fields, catalog)
    except FieldError as exc:
        preset = _preset_named(catalog, fields.get("params")) if exc.field == "params" else None
        if preset is None:
            raise
        raise FieldError("params", f"{{params}} {escape_braces(repr(fields['params']))} is a "
                         f"model name: choose {escape_braces(preset)} in {{model}}, or type a "
                         "count such as 7B") from None


def _preset_named(catalog: Catalog | None, text: str | None) -> str | None:
    """The catalog model preset ``text`` names (id or name, any case, or a close spelling)."""
    if not text or catalog is None:
        return None
    import difflib

    names = {}
    for model in catalog.models.values():
        for name in (model.id, getattr(model, "name", None)):
            if name:
                names[name.lower()] = model.name or model.id
    key = text.strip().lower()
    if key in names:
        return names[key]
    close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.75)
    return names[close[0]] if close else None


def _number(form: dict, key: str, field: str) -> float | None:
    text = (form.get(key) or "").strip()
    try:
        value = float(text) if text else None
    except ValueError:
        raise ValueError(f"{label(field)}: {text!r} is not a number") from None
    if value is not None and not value > 0:
        raise ValueError(f"{label(field)}: must be positive")
    return value


def _choice(form: dict) -> BuilderChoice:
    hours = _number(form, "b-hours", "hours") or 730.0
    if not 0 < hours <= 744:
        raise ValueError("hours/month: must be between 0 and 744")
    pct = (form.get("b-pct") or "p95").lstrip("p")
    return BuilderChoice(accelerator=form.get("b-accel"), hours_per_month=hours,
                         spot_allowed=bool(form.get("b-spot")),
                         current_instance=(form.get("b-current") or "").strip() or None,
                         rate_rps=_number(form, "b-rate", "rate"), ttft_ms=_number(form, "b-ttft", "ttft_ms"),
                         tpot_ms=_number(form, "b-tpot", "tpot_ms"), slo_percentile=float(pct),
                         layout_given=form.get("b-sharding") not in (None, "auto"))


def compute(catalog: Catalog | None, form: dict) -> BuilderResult:
    """Build the workload and plan it (runs in a worker thread; never raises)."""
    from fleet_tui.core.errors import FieldError, UserError

    try:
        choice = _choice(form)
        workload = build_workload(catalog, form)
        report = plan_report(catalog, workload, choice)
    except FieldError as exc:  # the core names its fields; here they are the form's labels
        return BuilderResult(None, BuilderChoice(), "", error=exc.render(label),
                             error_field=exc.field)
    except (ValueError, UserError) as exc:
        return BuilderResult(None, BuilderChoice(), "", error=str(exc))
    except Exception as exc:  # an engine bug is shown, the form stays usable
        return BuilderResult(None, BuilderChoice(), "",
                             error=f"internal error while sizing: {type(exc).__name__}: {exc}")
    markup = describe_report(report, choice)
    if choice.current_instance and catalog is not None:
        try:  # a typo marks the field; sizing and ranking go on without it
            catalog.find_instance(choice.current_instance)
        except UserError as exc:
            return BuilderResult(workload, choice,
                                 f"[$warning]current instance: {escape(str(exc))}[/]\n" + markup,
                                 report=report, error_field="current")
    return BuilderResult(workload, choice, markup, report=report)


def plan_request(workload: Workload, choice: BuilderChoice) -> PlanRequest:
    """The core's PlanRequest for the form: what ``fleet-tui size`` would ask with these flags."""
    from fleet_tui.core.plan import PlanRequest

    return PlanRequest(workload, choice.accelerator, layout_given=choice.layout_given,
                       demand=choice.demand(workload) if workload.is_generation else None,
                       hours_per_month=choice.hours_per_month)


def plan_report(catalog: Catalog | None, workload: Workload, choice: BuilderChoice
                ) -> PlanReport | None:
    """The plan of the form's workload on its accelerator, or, with "(best)", on the top-ranked offer
    (None when no offer fits)."""
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.plan import plan_best, plan_workload

    if catalog is None:  # a keystroke before the load finished: the plan follows the load
        raise UserError("The catalog is still loading; the plan shows once it has loaded.")
    req = plan_request(workload, choice)
    return plan_workload(req, catalog) if choice.accelerator else plan_best(req, catalog)


def describe_plan(plan: ServingPlan) -> str:
    """The serving capacity plan of a report (the core's ``serving_plan``)."""
    if plan.replicas is None:
        return f"[b $primary]Plan[/]  speed unknown: {escape(plan.unknown)}"
    line = (f"[b $primary]Plan[/]  {plan.rate_rps:g} req/s → {plan.replicas} replica(s), {plan.devices} devices, "
            f"{plan.concurrency_per_replica} in flight each ({escape(plan.engine)})")
    if plan.ttft_s is not None and plan.tpot_s is not None:
        at = f" at p{plan.slo_percentile:g}" if plan.slo_percentile is not None else " (mean)"
        met = ("" if not plan.has_targets else
               " · [$success]meets the targets[/]" if plan.meets_slo else " · [$error]misses the targets[/]")
        line += (f" · first token {plan.ttft_s * 1e3:,.0f} ms, {plan.tpot_s * 1e3:,.1f} ms/token{at}{met}")
    if plan.usd_per_month is not None:
        line += f" · {usd(plan.usd_per_month, 0)}/month · {usd(plan.usd_per_million_tokens)} per 1M output tokens"
    return line


def describe_cost(cost: SetupCost | None, accelerator: str, devices: int,
                  throughput: Throughput | None) -> str:
    """The cheapest catalog offer that deploys the devices (the core's ``deployed_cost``)."""
    if cost is None:
        return (f"[b $primary]Cost[/]  no priced offer in the catalog carries {devices}× "
                f"{escape(accelerator)} as deployed")
    i = cost.instance
    boxes = f"{cost.instances}× " if cost.instances > 1 else ""
    line = (f"[b $primary]Cost[/]  {usd(cost.usd_per_hour)}/h · {usd(cost.usd_per_month, 0)}/month "
            f"at {cost.hours_per_month:g} h")
    if cost.usd_per_million_tokens is not None and throughput is not None:
        what = "generated" if throughput.phase == "decode" else "processed"
        line += f" · {usd(cost.usd_per_million_tokens)} per 1M tokens {what}"
    detail = (f"  [$text-muted]cheapest {cost.pricing} offer with {devices}× {escape(accelerator)}: "
              f"{boxes}{escape(i.instance_type)} ({escape(i.cloud)} {escape(i.region)})")
    if cost.idle_devices:
        detail += f", {cost.idle_devices:g} device{'s' if cost.idle_devices != 1 else ''} idle"
    return line + "\n" + detail + " · every offer ranked: ctrl+r[/]"


def _verdict_lines(report: PlanReport) -> list[str]:
    v = report.verdict
    where = f"{report.gpus}× {escape(report.accelerator or '')}"
    layout = f" as {escape(report.layout)}" if report.layout else ""
    # free (fits) or missing (does not fit) memory per device
    room = "?" if v.headroom_bytes is None else f"{abs(v.headroom_bytes) / 2**30:,.1f}"
    if v.status == "fits":
        return [f"[b $success]✔ Fits[/] on {where}{layout}: {room} GiB headroom per device"]
    if v.status == "does_not_fit":
        return [f"[b $error]✘ Does not fit[/] on {where}{layout}: short by "
                f"{room} GiB per device", escape(v.message)]
    engine = escape(report.engine.engine) if report.engine is not None else ""
    if v.status == "starts":
        queue = f", {v.queued:,} queued" if v.queued else ""
        return [f"[b $success]✔ Starts[/] on {where}{layout} ({engine}): runs {v.running:,} at a time "
                f"({escape(v.running_limit)}){queue}"]
    return [f"[b $error]✘ Does not start[/] on {where}{layout} ({engine}): "
            f"{escape(v.message)}", f"[$text-muted]{escape(v.engine_error)}[/]"]


def describe_report(report: PlanReport | None, choice: BuilderChoice | None = None) -> str:
    """Lay out the core's PlanReport (the core decides everything; this only lays it out).

    The answer comes first, so 80×24 shows it without scrolling: the verdict, the first change
    that would make it fit, speed and cost; then the other changes, the memory breakdown, the
    engine's reserve and the notes."""
    if report is None:
        return "[$warning]No catalog offer fits this workload.[/]"
    lines: list[str] = []
    if report.offer:
        lines.append(f"[b $primary]Best offer[/]  {escape(report.offer)}")
    v = report.verdict
    fixes = list(report.fixes)
    word = "start" if v.status == "does_not_start" else "fit"

    def change(s) -> str:
        return (f"  [$accent]→[/] {escape(s.render_form(label, LABELS))} "
                f"[$text-muted]({s.total_bytes / 2**30:,.1f} GiB/device on {s.gpus})[/]")

    if v.status == "unchecked":
        lines.append("[$text-muted]Choose an accelerator to see whether it fits.[/]")
    else:
        lines += _verdict_lines(report)
        if v.precision_supported is False:
            lines.append(f"[$warning]{escape(report.accelerator or '')} has no native path for this precision.[/]")
        if fixes:
            lines.append(f"[b]First change that would make it {word}:[/]")
            lines.append(change(fixes[0]))
    thr = report.speed
    if thr is not None and thr.tokens_per_s is None:
        # a spec figure the estimate needs was never published: say which, invent nothing
        lines.append("[b $primary]Speed (model)[/]  unknown: "
                     + escape(thr.unknown or "no published figure for this device"))
    elif thr is not None:
        parts = [f"{thr.tokens_per_s:,.0f} tokens/s ({escape(str(thr.phase))}, {thr.bound}-bound)"]
        if thr.time_to_first_token_s is not None:
            parts.append(f"first token {thr.time_to_first_token_s * 1000:,.0f} ms")
        if thr.time_per_output_token_s is not None:
            parts.append(f"{thr.time_per_output_token_s * 1000:,.1f} ms/token")
        if thr.mfu is not None:
            parts.append(f"MFU {thr.mfu:.0%}")
        lines.append("[b $primary]Speed (model)[/]  " + " · ".join(parts))
    if report.cost is not None or (report.accelerator and v.ok):
        lines.append(describe_cost(report.cost, report.accelerator or "", report.gpus, thr))
    if report.serving_plan is not None:
        lines.append(describe_plan(report.serving_plan))
    if len(fixes) > 1:
        lines.append(f"[b]Other changes that would make it {word}:[/]")
        lines += [change(s) for s in fixes[1:]]
    memory = report.memory
    where = f" — peak during {escape(memory.phase)}" if memory.phase else ""
    lines.append(f"\n[b $primary]Memory per device[/] ({memory.gpus} device"
                 f"{'s' if memory.gpus != 1 else ''}){where}")
    lines.append(memory_bar_markup(memory.breakdown, v.capacity_bytes))
    if report.links and thr is not None:  # the links the speed was charged on, as size prints them
        lines.append(f"[b $primary]Links[/]  {escape(report.links)}")
    e = report.engine
    if e is not None:
        parts = " · ".join(f"{k.replace('_', ' ')} {b / 2**30:,.1f}" for k, b in e.parts.items() if b)
        lines.append(f"\n[b $primary]{escape(e.engine)} reserves[/] {e.reserved_bytes / 2**30:,.1f} GiB per "
                     f"device: {parts} GiB")
    kv = report.kv_capacity
    if kv is not None:
        lines.append(f"[b $primary]KV cache[/] ({escape(report.workload.engine or '')})  {kv.tokens:,} tokens free → "
                     f"{kv.concurrent_sequences:,} concurrent sequences of "
                     f"{kv.sequence_tokens:,} tokens")
    for note in report.assumption_lines(label):
        lines.append(f"[$text-muted]{escape(note)}[/]")
    return "\n".join(lines)
