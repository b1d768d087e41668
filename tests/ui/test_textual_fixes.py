"""The compositor's partial updates render only the widgets a dirty region touches
(``textual_fixes.partial_update_renders_dirty_widgets``) and write the same bytes as Textual's own.

Each partial update of the real monitor pane (sim:8, a few ticks, a card opened and closed) is
rendered twice from the same dirty regions: once as Textual renders it (every widget whose clip
meets the box around the dirty regions) and once with the correction; the terminal output of the
two must be identical, and the correction must have rendered fewer widgets.
"""

from __future__ import annotations

from textual._compositor import Compositor
from textual.widget import Widget

from fleet_tui.ui import textual_fixes
from fleet_tui.ui.launch import AppConfig, build_app


async def test_partial_updates_write_the_same_bytes_rendering_fewer_widgets(monkeypatch):
    textual_fixes.install()
    assert "partial_update_renders_dirty_widgets" in textual_fixes.APPLIED
    corrected = Compositor.render_partial_update
    rendered: list[str] = []
    render_lines = Widget.render_lines

    def counting_render_lines(self, crop):
        rendered.append(type(self).__name__)
        return render_lines(self, crop)

    compared: list[tuple[int, int]] = []  # (widgets Textual rendered, widgets corrected rendered)
    console = {}

    def both(self):
        dirty = set(self._dirty_regions)
        if not dirty:
            return corrected(self)
        rendered.clear()
        with monkeypatch.context() as m:  # more regions than the cap: Textual's own renders
            m.setattr(textual_fixes, "MAX_DIRTY_REGIONS", -1)
            upstream = corrected(self)
        upstream_count = len(rendered)
        rendered.clear()
        self._dirty_regions.update(dirty)
        update = corrected(self)
        assert (update.render_segments(console["c"]) == upstream.render_segments(console["c"]))
        compared.append((upstream_count, len(rendered)))
        return update

    monkeypatch.setattr(Widget, "render_lines", counting_render_lines)
    monkeypatch.setattr(Compositor, "render_partial_update", both)
    app = build_app(AppConfig(source="sim:8", interval_s=0.25))
    app.animation_level = "none"
    console["c"] = app.console
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(3.0)
        await pilot.press("enter")  # a card opened: the layout changes, then partial updates
        await pilot.pause(1.5)
        await pilot.press("escape")
        await pilot.pause(1.5)
    assert len(compared) >= 8, compared
    assert all(ours <= theirs for theirs, ours in compared)
    assert sum(ours for _t, ours in compared) < 0.8 * sum(theirs for theirs, _o in compared)


def _source_hash(target: str) -> str:
    """SHA-256 (16 hex digits) of ``module:Class.method``'s source in the installed Textual, read
    from the file (install() may already have replaced the attribute)."""
    import ast
    import hashlib
    import importlib

    module, qualname = target.split(":")
    cls_name, fn_name = qualname.split(".")
    path = importlib.import_module(module).__file__
    assert path is not None
    with open(path, encoding="utf-8") as f:
        src = f.read()
    cls = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == fn_name)
    segment = ast.get_source_segment(src, fn)
    assert segment is not None
    return hashlib.sha256(segment.encode()).hexdigest()[:16]


def test_the_patched_textual_code_is_the_code_the_corrections_were_written_for():
    from importlib.metadata import version

    assert version("textual") == textual_fixes.WRITTEN_FOR
    changed = {t: _source_hash(t) for t, h in textual_fixes.PATCHED.items() if _source_hash(t) != h}
    assert changed == {}, "Textual changed what ui/textual_fixes.py patches: re-read each correction"
