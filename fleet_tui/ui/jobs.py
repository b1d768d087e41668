"""Jobs pane (``--source prometheus:URL``): whose job holds which GPUs and what its idle GPUs cost,
worst first; Enter opens the job's efficiency report (the text of ``fleet-tui jobs report JOB``).

The rows are the core's ``JobsView`` (``core.cluster.jobs.job_view``), built in a thread worker
from the engine's latest tick (the same FleetView the fleet pane draws) and the devices' job labels
(``core.cluster.promjobs``: dcgm-exporter ``hpc_job``, Kubernetes pod labels, AMD exporter
``job_id``, jobstats gauges), which are re-read every ``LABELS_EVERY_S``: jobs change in minutes,
not seconds. Without Slurm a job's start is unknown, so runtime and idle GPU-hours count from when
this pane started watching (a lower bound). As in the fleet pane, the worker gets the immutable tick,
uses the pane's ``FleetViews`` under a lock (a superseded exclusive worker may still run) and hands
back an immutable ``JobsView``; ``JobsScreen.ViewDrawn`` says a view was drawn. The
job alert rules (``min_devices`` in alerts.toml,
e.g. the bundled ``job-idle-gpus``: 8 GPUs idle for 30 minutes) are evaluated here, where the jobs
are known, and shown as notifications."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from fleet_tui.ui.fleet import FleetViewPane
from fleet_tui.ui.widgets.gauges import pct, usd
from fleet_tui.ui.widgets.table import Table
from fleet_tui.ui.widgets.text import escape_text

if TYPE_CHECKING:  # for the checker only: the core's fleet and jobs load with the first view
    from fleet_tui.core.cluster.headnode import HeadNodeView
    from fleet_tui.core.cluster.jobs import JobsView
    from fleet_tui.core.fleet import FleetViews
    from fleet_tui.core.monitor.analysis.diagnosis import DeviceAnalysis
    from fleet_tui.core.monitor.snapshot import Snapshot

LABELS_EVERY_S = 30.0
MAX_ROWS = 500  # a bounded page: DataTable measures every cell of every row added
# essential columns first, so an 80-column terminal shows job, user, GPUs, util and idle $
COLUMNS = (("job", "job"), ("user", "user"), ("gpus", "gpus"), ("util", "util"),
           ("idle_usd", "idle $"), ("primary", "diagnosis"), ("sm", "SM"),
           ("idle_h", "idle GPU-h"), ("nodes", "nodes"))


class JobsScreen(FleetViewPane):
    MODE = "jobs"
    BINDINGS = [
        Binding("enter", "report", "Job report", show=False),
        Binding("r", "report", "Job report"),
        Binding("escape", "back", "All jobs"),
    ]
    DEFAULT_CSS = """
    JobsScreen #jobs-summary { height: auto; padding: 0 1; }
    JobsScreen #jobs-table { height: 1fr; }
    JobsScreen #jobs-report { height: 1fr; border: round $pane-border; padding: 0 1;
                              display: none; }
    JobsScreen.-report #jobs-report { display: block; }
    JobsScreen.-report #jobs-table { display: none; }
    """

    class ViewDrawn(Message):
        """A jobs view was drawn (``jobs`` is the core JobsView now on screen)."""

        def __init__(self, jobs) -> None:
            super().__init__()
            self.jobs = jobs

    def __init__(self) -> None:
        super().__init__()  # _lock: one worker at a time also uses the labels and alerts
        self.jobs: JobsView | None = None  # the latest drawn
        self.report_job: str | None = None
        self._labels = None  # core DeviceLabels
        self._labels_at = -LABELS_EVERY_S
        self._labels_error: str | None = None
        self._started = time.time()
        self._alerts = None  # core AlertEvaluator of the job rules
        self.report: HeadNodeView | None = None  # the latest (running jobs are self.jobs)
        self._slurm = None  # (jobs, nodes) last read from Slurm
        self._slurm_at = -LABELS_EVERY_S
        self._slurm_error: str | None = None
        self.aggregated = None  # the latest FleetView when the fleet is aggregated on the server
        self.aggregated_jobs: list[dict] = []  # its jobs as drawn (FleetView.jobs_dict)
        self._allocation_note: str | None = None  # how an aggregated fleet's jobs were read

    def compose_body(self) -> ComposeResult:
        yield Static("waiting for the first fleet reading…", id="jobs-summary")
        yield Table(id="jobs-table", cursor_type="row", zebra_stripes=True)
        yield VerticalScroll(Static("", id="jobs-report-text"), id="jobs-report")

    def on_mount(self) -> None:
        table = self.query_one("#jobs-table", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)

    # ----- data -----
    # No arguments (as the fleet pane's worker): a finished worker is freed only by the cyclic
    # garbage collector, and with the tick as an argument it kept the whole snapshot alive until a
    # full collection. A description, or Textual builds one from repr().
    @work(thread=True, exclusive=True, group="jobs-view", exit_on_error=False,
          description="the jobs view")
    def _build(self) -> None:
        worker = get_current_worker()
        with self._newest() as newest:
            if newest is None:
                return
            views, tick = newest
            if tick[0].aggregate is not None:  # a fleet past the threshold
                fleet = views.view(*tick)
                report = self._aggregated_report(fleet)
                if report is not None:  # Slurm's allocations joined with the server's readings
                    if not worker.is_cancelled:
                        self.app.call_from_thread(self._draw_new, report, True)
                    return
                rows = fleet.jobs_dict(self._read_slurm(time.time())[0])
                if not worker.is_cancelled:
                    self.app.call_from_thread(self._draw_aggregate, fleet, rows)
                return
            report, alerts = self._jobs_of(views, *tick)
        if not worker.is_cancelled:
            self.app.call_from_thread(self._draw_new, report)
        if alerts:  # events: shown even when a newer view superseded this one
            self.app.call_from_thread(self._notify, alerts)

    def _aggregated_report(self, fleet):
        """With Slurm, an aggregated fleet's head-node report: the GPUs Slurm's running jobs hold
        (``cluster.aggjobs``), attributed as device by device; None without Slurm or its jobs
        (the server's hpc_job roll-ups are drawn then), or when the GPUs are not read (said)."""
        from fleet_tui.core.cluster.aggjobs import read_job_usages
        from fleet_tui.core.cluster.headnode import head_node_view
        from fleet_tui.core.monitor.sources.prometheus import PrometheusResponseError

        client = getattr(self.app.source, "client", None)
        now = time.time()
        slurm_jobs, nodes = self._read_slurm(now)
        if client is None or not slurm_jobs or not self._uses_slurm():
            return None
        try:
            read = read_job_usages(client, fleet, slurm_jobs, observed_s=now - self._started)
        except (OSError, ValueError, PrometheusResponseError) as exc:
            self._slurm_error = f"GPUs of Slurm's jobs not read: {exc}"
            return None
        agg = fleet.aggregate
        self._allocation_note = (
            f"aggregated on the server (more than {agg.threshold if agg else '?'} devices); "
            f"Slurm's jobs hold {read.nodes} nodes: {read.whole_nodes} whole, from the node roll-ups, "
            f"{read.device_nodes} read device by device")
        return head_node_view(list(read.usages), slurm_jobs, now=now, nodes=nodes, slurm=True,
                              attributed=read.held)

    def _notify(self, alerts) -> None:
        """Job alerts as a few notifications (``alert_notices``: 200 jobs idle at once are
        one notice naming the first jobs, not 200)."""
        from fleet_tui.core.monitor.alert_notices import alert_notices
        from fleet_tui.ui.widgets.severity import toast_level

        for notice in alert_notices(alerts):
            self.app.notify(notice.message, title=notice.title,
                            severity=toast_level(notice.severity), timeout=10)

    def _uses_slurm(self) -> bool:
        wanted = self.app.slurm
        if wanted is None:
            import shutil

            return shutil.which("squeue") is not None
        return bool(wanted)

    def _read_slurm(self, now: float):
        """Slurm's jobs and nodes, re-read every ``LABELS_EVERY_S`` (in the worker); the last
        answer is kept, with why, when a read fails."""
        recorded = getattr(self.app.source, "slurm_jobs", None)
        if recorded is not None:  # a fleet recording carries its own job list
            return recorded(), ()
        if not self._uses_slurm():
            return (), ()
        if now - self._slurm_at >= LABELS_EVERY_S:
            from fleet_tui.core.cluster.slurm import SlurmError, SlurmReader

            self._slurm_at = now
            reader = SlurmReader()
            try:
                jobs = reader.jobs()
                try:
                    nodes = reader.nodes()
                except SlurmError:
                    nodes = self._slurm[1] if self._slurm else []
                self._slurm = (jobs, nodes)
                self._slurm_error = None
            except SlurmError as exc:
                self._slurm_error = f"Slurm not read: {exc}"
        return self._slurm or ((), ())

    def _jobs_of(self, views: FleetViews, snapshot: Snapshot,
                 analyses: Mapping[str, DeviceAnalysis]):
        """The head-node report and the job alerts that fire now (in the worker, under the
        lock)."""
        from fleet_tui.core.cluster.headnode import head_node_view
        from fleet_tui.core.cluster.promjobs import DeviceLabels, job_label_query, labels_from_result, usages_from_view

        fleet = views.view(snapshot, analyses)
        now = time.time()
        query = getattr(self.app.source, "query_instant", None)
        if query is not None and now - self._labels_at >= LABELS_EVERY_S:
            self._labels_at = now
            try:
                self._labels = labels_from_result(query(job_label_query()))
                self._labels_error = None
            except Exception as exc:  # keep the last labels; say why they are old
                self._labels_error = f"job labels not read: {exc}"
        labels = self._labels if self._labels is not None else DeviceLabels()
        usages = usages_from_view(fleet, labels, observed_s=now - self._started)
        slurm_jobs, nodes = self._read_slurm(now)
        report = head_node_view(usages, slurm_jobs, now=now, nodes=nodes,
                                slurm=self._uses_slurm())
        jobs = report.running
        alerts = self._job_alerts().evaluate(
            snapshot.timestamp, snapshot.devices, analyses,
            jobs={j.job: [d.key for d in j.devices] for j in jobs.jobs})
        return report, alerts

    def _draw_new(self, report, aggregated: bool = False) -> None:
        if not aggregated:
            self._allocation_note = None
        self.report = report
        self._draw(report.running)
        self.view_drawn(self.ViewDrawn(report.running))

    def _draw_aggregate(self, fleet, jobs: list[dict]) -> None:
        """An aggregated fleet's jobs (``hpc_job``) as the server rolled them up, worst first,
        with Slurm's users where Slurm is read."""
        self.aggregated = fleet
        self.aggregated_jobs = jobs
        self.query_one("#jobs-summary", Static).update(
            aggregate_summary_markup(fleet, jobs, self._slurm_error))
        table = self.query_one("#jobs-table", DataTable)
        _refill(table, {j["job"]: aggregate_job_row(j) for j in jobs[:MAX_ROWS]})
        if self.report_job is not None:
            self._draw_report()
        self.view_drawn(self.ViewDrawn(fleet))

    def _job_alerts(self):
        """An evaluator of the job rules (``min_devices``) among the alert rules, made once."""
        if self._alerts is None:
            from fleet_tui.core.monitor.alerts import AlertEvaluator, load_alert_rules

            rules, _ = load_alert_rules()  # problems are reported by the monitor's own load
            self._alerts = AlertEvaluator([r for r in rules if r.per_job])
        return self._alerts

    # ----- drawing -----
    def _draw(self, jobs) -> None:
        self.jobs = jobs
        self.aggregated = None
        errors = "; ".join(e for e in (self._labels_error, self._slurm_error) if e) or None
        text = summary_markup(jobs, errors, self.report)
        if self._allocation_note:
            text += f"\n[dim]{escape_text(self._allocation_note)}[/dim]"
        self.query_one("#jobs-summary", Static).update(text)
        table = self.query_one("#jobs-table", DataTable)
        rows = {j.job: job_row(j) for j in jobs.jobs[:MAX_ROWS]}
        if [str(k.value) for k in table.rows] != list(rows):  # jobs came, went or reordered
            _refill(table, rows)
        else:  # same jobs in the same order: update changed cells in place
            columns = [key for key, _ in COLUMNS]
            for key, values in rows.items():
                for column, value in zip(columns, values):
                    if table.get_cell(key, column) != value:
                        table.update_cell(key, column, value)
        if self.report_job is not None:
            self._draw_report()

    def _draw_report(self) -> None:
        from fleet_tui.core.cluster.jobreport import job_report

        text = self.query_one("#jobs-report-text", Static)
        job_id = self.report_job
        if job_id is None:  # no report asked for
            return
        if self.aggregated is not None:
            job = next((j for j in self.aggregated_jobs if j["job"] == self.report_job), None)
            self.query_one("#jobs-report").border_title = f"Job {self.report_job}"
            text.update(escape_text(
                f"job {self.report_job}: " + (f"{job['devices']} GPUs on {job['nodes']} nodes, "
                                              f"util {pct(job['util_pct'])}, {job['idle_devices']} idle"
                                              if job else "no longer on the fleet")
                + "\nThe fleet is aggregated on the server: a job report needs every device's "
                  "readings (a fleet under --aggregate-above, or fleet-tui jobs report JOB).",
                lines=True))
            return
        try:
            if self.report is not None:
                job = self.report.running_job(job_id)
            elif self.jobs is not None:
                job = self.jobs.job(job_id)
            else:  # nothing drawn yet
                return
        except KeyError as exc:
            text.update(f"[$error]{escape_text(str(exc.args[0]))}[/]")
            return
        self.query_one("#jobs-report").border_title = f"Job {job.job}"
        text.update(escape_text(job_report(job), lines=True))

    # ----- actions -----
    def action_report(self) -> None:
        table = self.query_one("#jobs-table", DataTable)
        if (self.jobs is None and self.aggregated is None) or table.row_count == 0:
            return
        self.report_job = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        self.add_class("-report")
        self._draw_report()

    @on(DataTable.RowSelected, "#jobs-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.action_report()

    def action_back(self) -> None:
        self.report_job = None
        self.remove_class("-report")
        self.query_one("#jobs-table").focus()


def summary_markup(jobs, error: str | None = None, report=None) -> str:
    idle_h = sum(j.idle_device_hours for j in jobs.jobs)
    priced = [j.usd_idle for j in jobs.jobs if j.usd_idle is not None]
    loose = jobs.unattributed
    parts = [f"[b]{len(jobs.jobs)}[/] jobs", f"[b]{sum(len(j.devices) for j in jobs.jobs)}[/] GPUs "
             "held", f"idle [b]{idle_h:.2f}[/] GPU-h" + (f" ({usd(sum(priced))})" if priced else ""),
             f"[$text-muted]{len(loose)} GPUs without a job "
             f"({sum(1 for d in loose if d.idle_fraction > 0)} idle)[/]"]
    text = "  ·  ".join(parts)
    if report is not None and report.slurm:
        text += "\n" + escape_text(slurm_summary(report), lines=True)
    elif not jobs.jobs:
        text += ("\n[$text-muted]No device carries a job label (hpc_job, pod, job_id, or "
                 "jobstats' nvidia_gpu_jobId); --slurm (or squeue on PATH) joins Slurm's view.[/]")
    for c in jobs.conflicts[:3]:
        text += f"\n[$warning]conflict: {escape_text(c.message)}[/]"
    if error:
        text += f"\n[$error]{escape_text(error)}[/]"
    return text


def aggregate_summary_markup(fleet, jobs: list[dict], error: str | None = None) -> str:
    held = sum(j["devices"] for j in jobs)
    idle = sum(j["idle_devices"] for j in jobs)
    priced = [j["idle_usd_per_hour"] for j in jobs if j["idle_usd_per_hour"] is not None]
    threshold = fleet.aggregate.threshold if fleet.aggregate is not None else None
    parts = [f"[b]{len(jobs)}[/] jobs", f"[b]{held}[/] GPUs held",
             f"idle [b]{idle}[/] GPUs" + (f" ({usd(sum(priced))}/h)" if priced else ""),
             f"[$text-muted]{fleet.device_count - held} GPUs without a job[/]"]
    text = "  ·  ".join(parts)
    text += (f"\n[$accent]aggregated on the server[/]: more than {threshold} devices, so jobs "
             "are Prometheus' roll-ups by the hpc_job label (idle $ per hour; Slurm gives users, "
             "not GPUs; no per-job diagnosis)")
    errors = [*fleet.errors[:3], *([error] if error else [])]
    if errors:
        text += "\n[$error]" + escape_text("; ".join(errors)) + "[/]"
    return text


def aggregate_job_row(j: dict) -> tuple[str, ...]:
    """A job of an aggregated fleet in the table's columns (idle $ is per hour there)."""
    cost = j["idle_usd_per_hour"]
    return (j["job"], j["user"] or "-", str(j["devices"]), pct(j["util_pct"]),
            "-" if cost is None else f"{usd(cost)}/h", f"{j['idle_devices']} idle", "-", "-",
            f"{j['nodes']} nodes")


def job_row(j) -> tuple[str, ...]:
    return (j.job, j.user or "-", str(len(j.devices)), pct(j.util_pct),
            "-" if j.usd_idle is None else usd(j.usd_idle), j.primary.replace("_", " "),
            pct(j.sm_active_pct), f"{j.idle_device_hours:.2f}", ",".join(j.nodes))


def slurm_summary(report) -> str:
    """Pending work beside free and idle GPUs: "short" against "wasting", one line per part."""
    from collections import Counter

    reasons = Counter(p.reason for p in report.pending)
    lines = [f"pending: {len(report.pending)} jobs, {sum(p.gpus for p in report.pending)} GPUs"
             + (" (" + ", ".join(f"{r} {n}" for r, n in reasons.most_common(4)) + ")"
                if reasons else "")]
    for p in report.partitions[:6]:
        lines.append(f"{p.partition}: {p.gpus_free}/{p.gpus} GPUs free, {p.gpus_idle_allocated} "
                     f"held idle, {p.gpus_pending} asked by {p.pending_jobs} pending"
                     + (f", short {p.short_gpus}" if p.short_gpus else ""))
    return "\n".join(lines)


def _refill(table: DataTable, rows: dict[str, tuple]) -> None:
    """Replace the table's rows, the cursor kept on the same line (or the last one)."""
    cursor = table.cursor_row
    table.clear()
    for key, values in rows.items():
        table.add_row(*values, key=key)
    if rows:
        table.move_cursor(row=min(cursor, len(rows) - 1))
