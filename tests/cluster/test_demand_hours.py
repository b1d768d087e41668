"""A CSV demand profile with an ``hour`` column is read as the hours it names: a gap or a repeated
hour (which would shift every later hour of the plan) is refused at its line, through the CLI."""

from __future__ import annotations

import pytest

from fleet_tui.core.cluster.portfolio import read_demand
from fleet_tui.core.errors import UserError
from tests.cli_run import run


def test_consecutive_hours_from_any_start_are_read_in_order(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("hour,devices\n5,8\n6,16\n7,0\n", encoding="utf-8")
    assert read_demand(path) == [8.0, 16.0, 0.0]


@pytest.mark.parametrize(("rows", "line", "says"), [
    ("0,8\n100000000000,3\n", 3, "hour 100000000000 follows hour 0"),
    ("0,8\n0,16\n", 3, "hour 0 follows hour 0"),
    ("0,8\n2,16\n", 3, "hour 1 expected"),
    ("0,8\nnoon,16\n", 3, "'noon' is not a whole number"),
    ("-1,8\n", 2, "negative"),
])
def test_a_gap_or_a_repeat_names_the_file_and_line(tmp_path, rows, line, says):
    path = tmp_path / "d.csv"
    path.write_text("hour,devices\n" + rows, encoding="utf-8")
    with pytest.raises(UserError, match=f"d.csv:{line}: .*{says}"):
        read_demand(path)


def test_plan_answers_a_gap_with_exit_2_and_one_line(tmp_path, capsys):
    path = tmp_path / "demand.csv"
    path.write_text("hour,devices\n0,8\n1,16\n3,24\n", encoding="utf-8")
    code, out, err = run(capsys, "plan", "--demand", str(path), "--instance", "p5.48xlarge")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "demand.csv:4: hour 3 follows hour 1" in err


def test_a_file_without_an_hour_column_is_one_row_per_hour(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("devices\n8\n8\n3\n", encoding="utf-8")
    assert read_demand(path) == [8.0, 8.0, 3.0]
