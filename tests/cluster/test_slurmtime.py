"""Period bounds as sacct reads them, and a job's GPU-hours inside a period as sreport counts them."""

from __future__ import annotations

import time

import pytest

from fleet_tui.core.cluster.headnode import jobs_summary, seconds_within
from fleet_tui.core.cluster.slurm import SlurmJob
from fleet_tui.core.cluster.slurmtime import as_sacct, parse_when
from fleet_tui.core.errors import FieldError

NOW = 1_800_000_000.0


@pytest.mark.parametrize(("text", "ago"), [
    ("now", 0), ("now-1days", 86400), ("now-2weeks", 2 * 604800), ("now-30minutes", 1800),
    ("now-90", 90), ("now-3hours", 10800), ("7d", 7 * 86400), ("12h", 43200),
])
def test_relative_times(text: str, ago: int) -> None:
    assert NOW - parse_when(text, NOW, field="since") == ago


def test_iso_times_are_local_and_round_trip() -> None:
    t = parse_when("2027-01-15T10:20:30", NOW, field="since")
    assert time.localtime(t)[:6] == (2027, 1, 15, 10, 20, 30)
    assert as_sacct(t) == "2027-01-15T10:20:30"
    assert parse_when("2027-01-15", NOW, field="since") == parse_when("2027-01-15T00:00", NOW,
                                                                      field="since")


@pytest.mark.parametrize("text", ["yesterday", "now-5fortnights", "2027-13-01", "{x}", ""])
def test_other_forms_name_the_field(text: str) -> None:
    with pytest.raises(FieldError) as err:
        parse_when(text, NOW, field="until")
    assert err.value.field == "until" and "YYYY-MM-DD" in str(err.value)


def _job(job: str, start: float, end: float | None, gpus: int = 2) -> SlurmJob:
    return SlurmJob(job=job, user="u", account="a", state="RUNNING" if end is None else
                    "COMPLETED", nodes=("n1",), gpus=gpus, start_s=start, end_s=end)


def test_a_job_counts_its_part_inside_the_period() -> None:
    j = _job("1", NOW - 100, NOW - 40)
    assert seconds_within(j, NOW - 70, NOW, NOW) == 30  # began before the period
    assert seconds_within(j, NOW - 200, NOW - 90, NOW) == 10  # ends after it
    assert seconds_within(j, NOW - 30, NOW, NOW) == 0
    running = _job("2", NOW - 50, None)
    assert seconds_within(running, NOW - 20, NOW + 3600, NOW) == 20  # up to now


def test_summary_splits_a_job_across_periods() -> None:
    jobs = [_job("1", NOW - 100, NOW - 40), _job("2", NOW - 30, NOW - 10, gpus=1)]
    whole = jobs_summary(jobs, now=NOW, since="a", period=(NOW - 200, NOW))
    first = jobs_summary(jobs, now=NOW, since="a", period=(NOW - 200, NOW - 70))
    second = jobs_summary(jobs, now=NOW, since="a", period=(NOW - 70, NOW))
    assert whole.gpu_hours * 3600 == pytest.approx(2 * 60 + 20)
    assert first.gpu_hours * 3600 == pytest.approx(2 * 30) and first.jobs == 1
    assert (first.gpu_hours + second.gpu_hours) == pytest.approx(whole.gpu_hours)
