"""``catalog import-skypilot --out-dir``: a file given as the folder, or a folder that cannot be
made, is that flag's error (it used to read "README.md/gcp.toml: already exists; pass --force")."""

from __future__ import annotations

from fleet_tui.cli import main
from tests.paths import TESTS

GCP = TESTS / "fixtures/catalog/skypilot/gcp/vms.csv"


def _import(out_dir, capsys) -> tuple[int, str]:
    code = main(["catalog", "import-skypilot", str(GCP), "--out-dir", str(out_dir)])
    return code, capsys.readouterr().err


def test_a_file_as_the_out_dir_is_named_as_such(tmp_path, capsys):
    target = tmp_path / "notes.md"
    target.write_text("mine\n", encoding="utf-8")
    code, err = _import(target, capsys)
    assert code == 2 and "--out-dir" in err and "is a file, not a folder" in err
    assert "--force" not in err and target.read_text(encoding="utf-8") == "mine\n"


def test_a_folder_under_a_file_cannot_be_made(tmp_path, capsys):
    (tmp_path / "notes.md").write_text("mine\n", encoding="utf-8")
    code, err = _import(tmp_path / "notes.md" / "instances", capsys)
    assert code == 2 and "--out-dir" in err and "cannot write gcp.toml there" in err
    assert "Traceback" not in err


def test_a_new_folder_is_made(tmp_path, capsys):
    code, _ = _import(tmp_path / "a" / "b", capsys)
    assert code == 0 and (tmp_path / "a" / "b" / "gcp.toml").is_file()
