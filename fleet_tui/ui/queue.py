"""Queue pane: ``fleet-tui queue simulate`` as a form — a job list (``sacct --json`` output, a
Parallel Workloads Archive ``.swf``, or CSV) replayed on NODES × GPUS under the five policies side
by side, with the what-ifs (more nodes, part of the work on spot).

The simulation is the core's (``core.cluster.whatif.simulate_all`` over
``core.cluster.joblists.load_workload``), run in a thread worker when the form is submitted (Enter
in any field); a core error names its field, shown beside that field's label.
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.widgets import DataTable, Input, Label, Static

from fleet_tui.core.cluster.queue import short_duration
from fleet_tui.ui.pane import PaneScreen
from fleet_tui.ui.widgets.table import Table

# form fields: (id = the CLI's dest, label, placeholder, default)
FIELDS = (("file", "Job list", "sacct --json / .swf / .csv path", ""),
          ("nodes", "Nodes", "16", "16"),
          ("gpus_per_node", "GPUs/node", "8", "8"),
          ("add_nodes", "+ nodes", "0", "4"),
          ("spot_fraction", "Spot share", "0-1", "0.2"),
          ("backfill_depth", "Backfill depth", "all (Slurm: 500)", ""))
COLUMNS = (("policy", "policy"), ("mean", "mean wait"), ("p95", "p95 wait"),
           ("slow", "slowdown"), ("util", "util"), ("span", "makespan"), ("pre", "preempted"),
           ("top", "top user"))


class QueueScreen(PaneScreen):
    MODE = "queue"
    AUTO_FOCUS = "#queue-table"  # number keys switch panes until the user presses / to edit
    BINDINGS = [
        Binding("slash", "edit_form", "Edit form", key_display="/"),
        Binding("escape", "leave_field", "Leave field"),
        Binding("ctrl+r", "simulate", "Simulate"),
    ]
    DEFAULT_CSS = """
    QueueScreen #queue-form { height: auto; }
    QueueScreen .queue-field { width: 1fr; height: auto; }
    QueueScreen .queue-field.-file { width: 3fr; }
    QueueScreen #queue-status { height: auto; padding: 0 1; }
    QueueScreen #queue-table { height: auto; max-height: 9; }
    QueueScreen #queue-whatif { height: 1fr; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.doc = None  # the latest simulate_all document

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="queue-form"):
            recorded = self._recorded_defaults()
            for dest, label, placeholder, default in FIELDS:
                default = recorded.get(dest, default)
                with Vertical(classes="queue-field" + (" -file" if dest == "file" else "")):
                    yield Label(label, id=f"label-{dest}")
                    yield Input(value=default, placeholder=placeholder, id=f"q-{dest}")
        yield Static("Press / to edit the form: a job list (sacct --json, .swf or .csv), then Enter "
                     "replays it under fifo, priority, fair-share, backfill and preemption.",
                     id="queue-status")
        yield Table(id="queue-table", zebra_stripes=True)
        yield VerticalScroll(Static("", id="queue-whatif-text"), id="queue-whatif")

    def on_mount(self) -> None:
        table = self.query_one("#queue-table", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        if self._recorded_defaults():  # a recorded fleet's own job list: answer on the first screen
            self.action_simulate()

    def action_edit_form(self) -> None:
        self.query_one("#q-file", Input).focus()

    def _recorded_defaults(self) -> dict[str, str]:
        """A recorded fleet (fleet-replay) brings its own job list and node count."""
        source = getattr(self.app, "source", None)
        path = getattr(source, "job_list_path", None)
        if path is None:
            return {}
        return {"file": str(path), "nodes": str(len(getattr(source, "nodes", ()))),
                "gpus_per_node": str(getattr(source, "gpus_per_node", 8))}

    def action_leave_field(self) -> None:
        self.set_focus(None)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.action_simulate()

    def action_simulate(self) -> None:
        values = {dest: self.query_one(f"#q-{dest}", Input).value.strip() for dest, *_ in FIELDS}
        for dest, label, *_ in FIELDS:
            self.query_one(f"#label-{dest}", Label).update(label)
        self.query_one("#queue-status", Static).update("simulating…")
        self._simulate(values)

    @work(thread=True, exclusive=True, group="queue", exit_on_error=False)
    def _simulate(self, values: dict[str, str]) -> None:
        from fleet_tui.core.cluster.joblists import load_workload
        from fleet_tui.core.cluster.whatif import simulate_all
        from fleet_tui.core.errors import FieldError, UserError, escape_braces

        try:
            if not values["file"]:
                raise FieldError("file", "{file}: give the path of a job list")
            numbers: dict = {}
            for dest, kind in (("nodes", int), ("gpus_per_node", int), ("add_nodes", int),
                               ("spot_fraction", float)):
                try:
                    numbers[dest] = kind(values[dest] or 0)
                except ValueError:
                    raise FieldError(dest, f"{{{dest}}}: {escape_braces(repr(values[dest]))} "
                                           "is not a number") from None
            depth_text = values.get("backfill_depth", "").strip()
            try:
                depth = int(depth_text) if depth_text else None
            except ValueError:
                raise FieldError("backfill_depth", "{backfill_depth}: "
                                 f"{escape_braces(repr(depth_text))} is not a whole number") from None
            work_ = load_workload(values["file"])
            doc = simulate_all(work_.jobs, numbers["nodes"], numbers["gpus_per_node"],
                               ["fifo", "priority", "fair-share", "backfill", "preemption"],
                               add_nodes=numbers["add_nodes"],
                               spot_fraction=numbers["spot_fraction"], backfill_depth=depth)
            doc = {"file": work_.path, "format": work_.format, "jobs": len(work_.jobs),
                   "skipped": work_.skipped, **doc}
        except FieldError as exc:
            self.app.call_from_thread(self._field_error, exc)
            return
        except UserError as exc:
            self.app.call_from_thread(self._status, f"[$error]{escape(str(exc))}[/]")
            return
        self.app.call_from_thread(self._draw, doc)

    def _field_error(self, exc) -> None:
        labels = {dest: label for dest, label, *_ in FIELDS}
        field = getattr(exc, "field", "")
        if field in labels:
            self.query_one(f"#label-{field}", Label).update(f"[$error]{labels[field]} ✗[/]")
        self._status(f"[$error]{escape(exc.render(lambda name: labels.get(name, name)))}[/]")

    def _status(self, markup: str) -> None:
        self.query_one("#queue-status", Static).update(markup)

    def _draw(self, doc) -> None:
        self.doc = doc
        too_large = max((r["jobs_skipped_too_large"] for r in doc["policies"].values()), default=0)
        depth = doc.get("backfill_depth")
        self._status(f"{escape(str(doc['file']))} ({doc['format']}): {doc['jobs']} jobs "
                     f"({doc['skipped']} skipped) on {doc['gpus']} GPUs"
                     + (f"; {too_large} larger than the cluster, skipped" if too_large else "")
                     + "; backfill scans " + ("the whole queue" if depth is None
                                              else f"the first {depth} waiting jobs"))
        table = self.query_one("#queue-table", DataTable)
        table.clear()
        for name, row in policy_rows(doc["policies"]):
            table.add_row(*row, key=name)
        lines = []
        for name, what in (doc.get("what_if") or {}).items():
            if name == "add_nodes":
                lines.append(f"[b]With {what['nodes']} nodes[/]")
            else:
                lines.append(f"[b]{what['jobs_moved']} jobs ({what['gpu_hours_moved']:.1f} GPU-h) "
                             f"on spot[/]: +{what['extra_gpu_hours']:.2f} GPU-h lost to "
                             f"{what['expected_interruptions']:.2f} expected interruptions")
            lines += ["  " + "  ".join(f"{c:<10}" for c in row) for _, row in
                      policy_rows(what["policies"])]
            lines.append("")
        self.query_one("#queue-whatif-text", Static).update("\n".join(lines))



def policy_rows(policies: dict) -> list[tuple[str, tuple[str, ...]]]:
    rows = []
    for name, r in policies.items():
        top = max(r["user_share_pct"].items(), key=lambda kv: kv[1], default=("-", 0))
        rows.append((name, (name, short_duration(r["mean_wait_s"]), short_duration(r["p95_wait_s"]),
                            f"{r['mean_slowdown']:.2f}", f"{r['utilization_pct']:.1f}%",
                            short_duration(r["makespan_s"]), str(r["preemptions"]),
                            f"{top[0]} {top[1]:.0f}%")))
    return rows
