"""Right-sizing from a history database recorded from the simulated source."""

from __future__ import annotations

import sqlite3

import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.recorder import Recorder
from fleet_tui.core.monitor.rightsize import HEADROOM, HOURS_PER_MONTH, rightsize, weighted_percentiles
from fleet_tui.core.monitor.sources.sim import SimSource


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(include_user=False)


@pytest.fixture(scope="module")
def sim_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("rs") / "h.db"
    src = SimSource(n=4, interval_s=1.0, start_time=1_700_000_000.0, phase_ticks=20)
    with Recorder(db) as rec:
        for tick in range(200):
            rec.write(src.snapshot_at(tick))
    return db


def _p99(values):
    v = sorted(values)
    import math
    return v[max(0, math.ceil(0.99 * len(v)) - 1)]


def test_percentiles_match_the_recorded_rows(sim_db, catalog):
    rep = rightsize(sim_db, catalog, since_s=None, instance="p5.48xlarge")
    conn = sqlite3.connect(sim_db)
    for dev in rep.devices:
        vals = [r[0] for r in conn.execute(
            "SELECT gpu_util_pct FROM samples WHERE device_key=?", (dev.device_key,))]
        assert dev.samples == len(vals) == 200
        assert dev.gpu_util_pct.p99 == pytest.approx(_p99(vals))
        assert dev.gpu_util_pct.mean == pytest.approx(sum(vals) / len(vals))
        mem = [r[0] / 2**30 for r in conn.execute(
            "SELECT mem_used_bytes FROM samples WHERE device_key=?", (dev.device_key,))]
        assert dev.mem_used_gib.p99 == pytest.approx(_p99(mem))
    conn.close()


def test_candidates_hold_p99_memory_and_compute_and_are_cheaper(sim_db, catalog):
    rep = rightsize(sim_db, catalog, since_s=None, instance="p5.48xlarge", top=10)
    assert rep.current is not None and rep.current.accelerator_count == 8
    assert rep.current_accelerator == "H100"
    mems = [d.mem_used_gib.p99 for d in rep.devices]
    assert rep.need_mem_per_device_gib == pytest.approx(max(mems) * (1 + HEADROOM))
    peak = catalog.accelerator("H100").peak_tflops["bf16"]
    need = sum(d.sm_active_pct.p99 / 100 * peak for d in rep.devices) * (1 + HEADROOM)
    assert rep.need_bf16_tflops == pytest.approx(need)
    assert rep.candidates, "4 of 8 H100s busy at most: something cheaper must exist"
    prices = [c.usd_per_month for c in rep.candidates]
    assert prices == sorted(prices)
    for c in rep.candidates:
        inst = next(i for i in catalog.find_instance(c.instance_type, c.region) if i.cloud == c.cloud)
        assert inst.accelerator_memory_gib >= rep.need_mem_per_device_gib
        assert inst.total_accelerator_memory_gib >= rep.need_mem_total_gib
        acc = catalog.accelerators[inst.accelerator]
        assert acc.peak_tflops["bf16"] * inst.accelerator_count >= rep.need_bf16_tflops
        assert c.usd_per_month == pytest.approx(inst.price("on-demand") * HOURS_PER_MONTH)
        assert c.savings_usd_per_month == pytest.approx(rep.current.usd_per_month - c.usd_per_month)
        assert c.savings_usd_per_month > 0
    d = rep.to_dict()
    assert d["best"]["instance"] == rep.candidates[0].instance_type


def test_since_window_and_errors(sim_db, catalog, tmp_path):
    rep = rightsize(sim_db, catalog, since_s=50, instance=None)
    assert all(d.samples == 51 for d in rep.devices)  # newest sample and the 50 s before it
    assert rep.current is None and any("--instance" in n for n in rep.notes)
    with pytest.raises(UserError, match="no such history database"):
        rightsize(tmp_path / "none.db", catalog)
    with pytest.raises(UserError):
        rightsize(sim_db, catalog, instance="p5.48xlarg")


def test_weighted_percentiles_use_weights():
    p = weighted_percentiles([(1.0, 98), (100.0, 2)])
    assert p.median == 1.0 and p.p99 == 100.0 and p.mean == pytest.approx(2.98)
    assert weighted_percentiles([]).p99 is None
