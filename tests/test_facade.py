"""The importable API: every name fleet_tui.core advertises resolves, lazily."""

import subprocess
import sys

import fleet_tui.core as core


def test_every_exported_name_resolves():
    missing = []
    for name in core.__all__:
        try:
            getattr(core, name)
        except (AttributeError, ImportError) as exc:
            missing.append(f"{name}: {exc}")
    assert not missing, "facade names that do not resolve:\n" + "\n".join(missing)


def test_importing_the_facade_is_lazy():
    code = (
        "import sys, fleet_tui.core;"
        "heavy = [m for m in ('pydantic', 'textual', 'rich', 'fleet_tui.core.catalog') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_unknown_name_is_an_attribute_error():
    try:
        core.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
