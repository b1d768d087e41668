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


def test_exported_names_are_never_shadowed_by_submodules():
    # Importing a submodule binds its name on the package, so an exported function that shares a
    # submodule's name (``recommend`` in a ``core/recommend.py``) turns into that module as soon as
    # anything imports it first. Load every submodule, then resolve every name, in a fresh process.
    code = (
        "import importlib, pkgutil, types, fleet_tui.core as core\n"
        "for info in pkgutil.walk_packages(core.__path__, 'fleet_tui.core.'):\n"
        "    importlib.import_module(info.name)\n"
        "bad = [n for n in core.__all__ if isinstance(getattr(core, n), types.ModuleType)]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


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


def test_checker_view_names_the_same_modules_as_the_lazy_map():
    # __all__ and the TYPE_CHECKING imports exist for the type checker; _EXPORTS is what runs.
    import ast
    from pathlib import Path

    tree = ast.parse(Path(core.__file__).read_text())
    seen: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                seen.update({a.name: imp.module for a in imp.names})
    assert seen == core._EXPORTS
    assert sorted(core.__all__) == sorted(core._EXPORTS)
