"""The fleet-tui app: one Textual mode per pane over the engine in ``fleet_tui.core``.

The app owns the long-lived engine objects (the catalog, the workload the builder edits, the monitor
engine) and exposes them as reactive attributes the panes watch. It adds no logic of its own: panes
call the core and show what it returns. Slow work (catalog load, sizing, ranking, sampling) runs in
workers so the event loop only paints.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import ScreenStackError, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from fleet_tui.ui import textual_fixes
from fleet_tui.ui.host import AppHost
from fleet_tui.ui.panes import PANES, PaneInfo, pane_class
from fleet_tui.ui.state import MOUNTING, CatalogStatus, SourceStatus
from fleet_tui.ui.themes import LoadedTheme

if TYPE_CHECKING:  # for the checker only: these load after the first frame (start-up time)
    from fleet_tui.core.catalog.models import Catalog
    from fleet_tui.core.monitor.source import Source
    from fleet_tui.ui.help import HelpSection
    from fleet_tui.ui.monitor_link import MonitorLink


def _screen(mode: str):
    return lambda: pane_class(mode)()


def _as_binding(b: BindingType) -> Binding:
    """A ``BINDINGS`` entry as a Binding (a pane may write ``(key, action[, description])``)."""
    if isinstance(b, Binding):
        return b
    if len(b) == 2:
        return Binding(b[0], b[1])
    return Binding(b[0], b[1], b[2])


class FleetApp(AppHost):
    TITLE = "fleet-tui"
    CSS_PATH = "styles/app.tcss"
    MODES = {pane.mode: _screen(pane.mode) for pane in PANES}

    BINDINGS = [
        # the pane bar shows the pane keys; the footer keeps its room for the pane's own keys,
        # ? and q (at 80 columns they were cut off)
        *(Binding(pane.key, f"switch_mode('{pane.mode}')", pane.label, tooltip=pane.tooltip,
                  show=False) for pane in PANES),
        # a pane whose source is missing has its binding above hidden and disabled; this says why
        *(Binding(pane.key, f"pane_unavailable('{pane.mode}')", show=False)
          for pane in PANES if pane.needs_source),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, *, source_spec: str | None = None, source: Source | None = None,
                 instance: str | None = None, theme: str = "fleet-dark",
                 themes: Iterable[LoadedTheme] = (), catalog_dirs: Iterable[str | Path] = (),
                 include_user_catalog: bool = True, interval_s: float = 1.0,
                 start_mode: str | None = None, export_dir: str | Path | None = None,
                 record_db: str | Path | None = None, slurm: bool | None = None) -> None:
        textual_fixes.install()
        self.slurm = slurm  # the Jobs pane asks Slurm; None: when squeue is on PATH
        kind = source.kind if source is not None else "none"
        self._start_mode = start_mode or ("monitor" if source is not None else "catalog")
        if self._start_mode == "catalog":
            # Textual then builds the Catalog pane as its first screen, instead of a blank default
            # screen and a mode switch in on_mount (a CSS refresh less before the first frame:
            # bench/bench_app.py --first-frame). The catalog pane needs nothing on_mount sets up;
            # the live panes do, so they are still switched to there.
            # Textual reads DEFAULT_MODE once, in App.__init__: the instance's value picks this run's
            self.DEFAULT_MODE = "catalog"  # pyright: ignore[reportAttributeAccessIssue]
        super().__init__()
        for loaded in themes:
            self.register_theme(loaded.theme)
        self.theme = theme
        self.source_spec = source_spec
        self.source = source  # an unopened core Source (or None: no monitor)
        self.instance_type = instance
        self.instance_error: str | None = None  # the catalog's answer to a mistyped --instance
        self.catalog_dirs = tuple(Path(d) for d in catalog_dirs)
        self.include_user_catalog = include_user_catalog
        self.interval_s = interval_s
        self.export_dir = Path(export_dir) if export_dir else Path.cwd()
        self.record_db = Path(record_db) if record_db else None  # --record: keep the history
        self.monitor: MonitorLink | None = None  # once started
        self.source_kind = kind
        self.has_fleet = kind == "fleet"
        self.source_status = SourceStatus(kind=kind, spec=source_spec or "", interval_s=interval_s,
                                          message=None if source is not None else "no source")

    # ----- start-up -------------------------------------------------------------------------
    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual's own themes (reachable through the palette) do not define the panes' border
        # colour; fleet themes derive one (ui/themes.py). A mid grey shows on light and dark.
        return {**super().get_theme_variable_defaults(), "pane-border": "#808080"}

    def on_mount(self) -> None:
        self.catalog_settled = asyncio.Event()  # set once the catalog loaded or failed
        self._install_exit_signals()
        self.switch_mode(self._start_mode)
        # After the first frame: the load is a thread, but pure Python holds the GIL while it
        # parses, and the first paint should not wait for that.
        self.call_after_refresh(self.load_catalog)
        if self.source is not None:
            from fleet_tui.ui.monitor_link import MonitorLink

            self.monitor = MonitorLink(self, self.source, self.interval_s)
            self.call_after_refresh(self.monitor.start)  # engine imports wait for the first frame

    #: How long a closed terminal's or a kill's graceful exit may take before the process ends
    #: itself. With the terminal gone, Textual's shutdown can block for ever writing the
    #: "restore the terminal" sequences to a dead pty (seen: a tmux session killed while the app
    #: was starting left it asleep on its output queue, holding its session history).
    EXIT_GRACE_S = 3.0

    def _install_exit_signals(self) -> None:
        """A closed terminal (SIGHUP) or a kill (SIGTERM) ends the app as ``q`` does: the
        temporary session history is removed first, then the app exits (within ``EXIT_GRACE_S``)."""
        loop = asyncio.get_running_loop()
        for name in ("SIGHUP", "SIGTERM"):
            signum = getattr(signal, name, None)
            if signum is None:
                continue
            try:
                loop.add_signal_handler(signum, self._exit_on_signal, signum)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                pass

    def _exit_on_signal(self, signum: int = 0) -> None:
        if self.monitor is not None:
            self.monitor.remove_session()
        import os
        import threading

        # the shell's convention for "ended by signal N"; os._exit skips nothing that matters here:
        # the history is already removed and the terminal is gone (or being killed)
        watchdog = threading.Timer(self.EXIT_GRACE_S, os._exit, args=(128 + signum,))
        watchdog.daemon = True
        watchdog.start()
        # kept: the loop holds tasks weakly; the exit status says which signal ended it (143, 129)
        self._quit_task = asyncio.ensure_future(self._quit(1, return_code=128 + signum))

    #: Set once q, ctrl+c or a signal asked the app to quit: panes start no more deferred mounts.
    quitting = False
    #: How long quitting waits for the widgets a pane is mounting (``PaneScreen.mount_later``).
    QUIT_WAIT_S = 2.0

    async def action_quit(self) -> None:
        """q and ctrl+c: exit once the pane on screen and the widgets it is mounting are mounted.
        Textual's shutdown removes a screen's widgets while widgets still being mounted handle
        their mount messages, and their handlers then fail to find their children (NoMatches: a
        traceback and exit status 1). It happened on quitting just as the Catalog pane mounted its
        filter row (once, in tests/e2e/test_tmux.py on a loaded core), and on quitting a few
        milliseconds after a pane key (the Workload pane's on_mount: the key, on its way through
        the focused widget, reached the app after ctrl+c, so pane keys do nothing once quitting)."""
        await self._quit()

    async def _quit(self, result: int | None = None, return_code: int = 0) -> None:
        self.quitting = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.QUIT_WAIT_S
        while loop.time() < deadline and self._mounting():
            await asyncio.sleep(0.01)
        self.exit(result, return_code=return_code)

    def _mounting(self) -> bool:
        """A pane's deferred mount is pending, or a widget of the screen shown is not mounted yet."""
        if any(w.group == MOUNTING and not w.is_finished for w in self.workers):
            return True
        try:
            screen = self.screen
        except ScreenStackError:  # no screen (yet, or any more): nothing to wait for
            return False
        return not all(node.is_mounted for node in screen.walk_children(Widget, with_self=True))

    def load_catalog(self) -> Worker:
        self.catalog_status = CatalogStatus("loading")
        return self.run_worker(self._load_catalog, thread=True, exclusive=True, group="catalog",
                               name="load catalog", exit_on_error=False)

    def _load_catalog(self) -> Catalog:
        from fleet_tui.core.catalog import load_catalog

        return load_catalog(extra_dirs=self.catalog_dirs, include_user=self.include_user_catalog)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group != "catalog":
            return
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            self.catalog_settled.set()
        if event.state == WorkerState.SUCCESS:
            from fleet_tui.core.catalog.models import Catalog  # loaded by the worker

            catalog = worker.result
            if not isinstance(catalog, Catalog):  # the group's one worker returns one
                return
            self.catalog = catalog
            self.catalog_status = CatalogStatus("ready", instances=len(catalog.instances))
            problems = catalog.problems
            if problems:
                self.notify("\n".join(problems[:5]) + ("\n…" if len(problems) > 5 else ""),
                            title=f"{len(problems)} catalog problem(s), entries skipped",
                            severity="warning", timeout=10)
            self._check_instance(catalog)
        elif event.state == WorkerState.ERROR:
            error = worker.error
            text = str(error) if error is not None else "unknown error"
            self.catalog_status = CatalogStatus("error", message=text.splitlines()[0] if text else "")
            self.notify(text, title="Catalog failed to load", severity="error", timeout=15)

    def _check_instance(self, catalog: Catalog) -> None:
        """A ``--instance`` the catalog does not know is said in the app, in the headless
        command's words (the core's UserError), and the monitor runs unpriced."""
        from fleet_tui.core.errors import UserError

        if not self.instance_type:
            return
        try:
            catalog.find_instance(self.instance_type)
        except UserError as exc:
            self.instance_error = str(exc)
            self.notify(f"{exc}\nThe cost meter and savings need a known instance type.",
                        title="Unknown --instance", severity="warning", timeout=15)

    def priced_instance(self) -> str | None:
        """The instance type to price this machine as (None when unknown to the catalog)."""
        return None if self.instance_error else self.instance_type

    # ----- actions ----------------------------------------------------------------------------
    def pane_available(self, pane: PaneInfo) -> bool:
        return pane.needs_source is None or pane.needs_source == self.source_kind

    def available_panes(self) -> tuple[PaneInfo, ...]:
        """The panes this run can show, in pane-bar order."""
        return tuple(pane for pane in PANES if self.pane_available(pane))

    async def action_switch_mode(self, mode: str) -> None:
        if self.quitting:  # a pane key that reaches the app after q or ctrl+c: its screen would
            return  # mount during shutdown (the Workload pane's on_mount raised NoMatches)
        pane = next((p for p in PANES if p.mode == mode), None)
        if pane is not None and not self.pane_available(pane):
            self.action_pane_unavailable(mode)
            return
        await self.switch_mode(mode)

    def action_pane_unavailable(self, mode: str) -> None:
        pane = next(p for p in PANES if p.mode == mode)
        self.notify(pane.unavailable or f"The {pane.title} pane is not available here.",
                    severity="warning")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("switch_mode", "pane_unavailable") and parameters:
            pane = next((p for p in PANES if p.mode == parameters[0]), None)
            if pane is not None:
                # an unavailable pane's key does nothing visible in the footer, but says why
                return self.pane_available(pane) == (action == "switch_mode")
        return True

    def action_help(self) -> None:
        from fleet_tui.ui.help import HelpScreen  # loaded on first use

        if isinstance(self.screen, HelpScreen) or self.quitting:
            return
        self.push_screen(HelpScreen(self.help_sections()))

    def help_sections(self) -> list[HelpSection]:
        """The current pane's keys first, then the keys that work everywhere, then the others."""
        from fleet_tui.ui.help import HelpSection, binding_keys, pane_section

        current = getattr(self.screen, "MODE", None)
        if current is None and len(self.screen_stack) > 1:  # opened over a modal: the pane below
            current = getattr(self.screen_stack[-2], "MODE", None)
        panes = self.available_panes()

        def section(pane: PaneInfo) -> HelpSection:
            title = pane.title if pane.mode != current else f"{pane.title} (this pane)"
            return pane_section(pane.mode, title,
                                self._bindings_list(getattr(pane_class(pane.mode), "BINDINGS", [])))

        switch = panes[0].key if len(panes) == 1 else f"{panes[0].key}–{panes[-1].key}"
        everywhere = HelpSection("Everywhere", (
            (switch, "switch pane"),
            *binding_keys([b for b in self._bindings_list(self.BINDINGS) if b.show]),
            ("ctrl+p", "command palette")))
        return ([section(p) for p in panes if p.mode == current] + [everywhere]
                + [section(p) for p in panes if p.mode != current])

    def help_text(self) -> str:
        """The help as the ``?`` screen shows it at 80 columns."""
        from fleet_tui.ui.help import format_help

        return format_help(self.help_sections())

    @staticmethod
    def _bindings_list(items: Iterable[BindingType]) -> list[Binding]:
        return [_as_binding(b) for b in items]

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for pane in self.available_panes():
            yield SystemCommand(f"Pane: {pane.title}", f"Switch to the {pane.title} pane",
                                lambda m=pane.mode: self.run_action(f"switch_mode('{m}')"))
        yield SystemCommand("Monitor sources", "Every --source the app can start with",
                            self._show_sources)
        for name in sorted(self.available_themes):
            if name.startswith("fleet-"):
                yield SystemCommand(f"Theme: {name}", f"Use the {name} theme",
                                    lambda n=name: setattr(self, "theme", n))
        yield SystemCommand("Export report as Markdown",
                            "Write the recommendations report (Markdown) to the current directory",
                            lambda: self._export("markdown"))
        yield SystemCommand("Export report as JSON",
                            "Write the recommendations report (JSON) to the current directory",
                            lambda: self._export("json"))
        yield SystemCommand("Export report to a path…",
                            "Write the recommendations report to a file you name (.json or .md)",
                            self._export_to_path)
        if self.monitor is not None:
            yield SystemCommand("Monitor: pause/resume", "Pause or resume sampling",
                                self.monitor.toggle_pause)

    def _show_sources(self) -> None:
        from fleet_tui.ui.help import HelpScreen, sources_markdown

        self.push_screen(HelpScreen(sources_markdown()))

    def _export_to_path(self) -> None:
        from fleet_tui.ui.report_export import REPORT_STEM, export_report
        from fleet_tui.ui.widgets.path_prompt import PathPrompt

        def chosen(path: str | None) -> None:
            if path:
                target = Path(path).expanduser()
                fmt = "json" if target.suffix.lower() == ".json" else "markdown"
                export_report(self, fmt, self.export_dir, target)

        default = str(self.export_dir / f"{REPORT_STEM}.md")
        self.push_screen(PathPrompt("Write the recommendations report to (.md or .json):", default),
                         chosen)

    def _export(self, fmt: str) -> None:
        from fleet_tui.ui.report_export import export_report

        export_report(self, fmt, self.export_dir)

    async def on_unmount(self) -> None:
        if self.monitor is not None:
            await self.monitor.stop()
