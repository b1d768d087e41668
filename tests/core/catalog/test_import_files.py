"""import-skypilot and user files: an existing <cloud>.toml is replaced only with --force, and a
binary CSV is named by file and line (never a UnicodeDecodeError traceback)."""

from __future__ import annotations

import pytest

from fleet_tui.cli import main
from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.catalog.importers.skypilot import import_skypilot
from fleet_tui.core.errors import FieldError, UserError
from tests.paths import TESTS

FIX = TESTS / "fixtures/catalog/skypilot"
LAMBDA = FIX / "lambda" / "vms.csv"


def test_cli_refuses_to_overwrite_without_force(tmp_path, capsys):
    out = tmp_path / "instances"
    out.mkdir()
    mine = out / "lambda.toml"
    mine.write_text("# my hand-edited offers\n")
    assert main(["catalog", "import-skypilot", str(LAMBDA), "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"fleet-tui: error: {mine}: already exists; pass --force to replace it"
    assert mine.read_text() == "# my hand-edited offers\n"
    assert sorted(p.name for p in out.iterdir()) == ["lambda.toml"]  # no temp file left
    assert main(["catalog", "import-skypilot", str(LAMBDA), "--out-dir", str(out), "--force"]) == 0
    assert "GENERATED" in mine.read_text()


def test_no_file_is_written_when_any_target_exists(tmp_path):
    out = tmp_path / "instances"
    out.mkdir()
    (out / "gcp.toml").write_text("x = 1\n")
    with pytest.raises(FieldError) as exc:
        import_skypilot([LAMBDA, FIX / "gcp" / "vms.csv"], out_dir=out, replace=False,
                        catalog=load_catalog(include_user=False))
    assert exc.value.field == "force"
    assert sorted(p.name for p in out.iterdir()) == ["gcp.toml"]  # lambda.toml not written either


@pytest.mark.parametrize("content, line, what", [
    (b"InstanceType,Region,Price\nx,us,1.0\n\x89PNG\r\n\x1a\n\x00\x00", 3, "not UTF-8 text"),
    (b"InstanceType,Region,Price\nx,us,1.0\ny,us\x00,2\n", 3, "not a CSV file"),
])
def test_a_binary_csv_is_named_by_file_and_line(tmp_path, capsys, content, line, what):
    bad = tmp_path / "lambda" / "vms.csv"
    bad.parent.mkdir()
    bad.write_bytes(content)
    with pytest.raises(UserError, match=rf"vms\.csv:{line}: {what}"):
        import_skypilot([bad], out_dir=tmp_path / "out", catalog=load_catalog(include_user=False))
    assert main(["catalog", "import-skypilot", str(bad), "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{line}: {what}" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
