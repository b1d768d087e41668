"""Cost meter: $/hour, dollars so far, idle/waiting dollars, efficiency; instance choice."""

from __future__ import annotations

import pytest

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.analysis import analyze_device_window
from fleet_tui.core.monitor.cost import CostMeter, accelerator_id_for, choose_instance
from fleet_tui.core.monitor.snapshot import DeviceSnapshot


def _an(uuid: str, busy: bool):
    d = DeviceSnapshot(index=0, name="G", uuid=uuid, gpu_util_pct=99.0 if busy else 0.0,
                       sm_active_pct=95.0 if busy else 0.0, tensor_active_pct=80.0 if busy else 0.0,
                       dram_active_pct=10.0)
    return d.key, analyze_device_window([d])


def test_dollars_are_booked_by_primary_diagnosis():
    meter = CostMeter(usd_per_hour=36.0, accelerator_count=4, instance_type="x")
    busy, idle = _an("A", True), _an("B", False)
    analyses = dict([busy, idle])
    meter.update(0.0, analyses)
    state = meter.update(3600.0, analyses)  # one hour, 4-GPU instance, 2 GPUs seen
    assert state.usd_so_far == pytest.approx(36.0)
    assert state.usd_idle == pytest.approx(9.0)
    assert dict(state.usd_by_kind)["healthy_compute"] == pytest.approx(9.0)
    assert dict(state.usd_by_kind)["unobserved"] == pytest.approx(18.0)
    assert state.efficiency == pytest.approx(0.5)  # of what was observed
    assert state.usd_per_day == pytest.approx(864.0)
    labels = [k for k, _ in state.lines()]
    assert "rate" in labels and "idle" in labels
    assert state.to_dict()["usd_so_far"] == pytest.approx(36.0)


def test_no_price_means_no_dollars():
    meter = CostMeter(usd_per_hour=None, candidates=("a", "b"))
    s = meter.update(10.0, dict([_an("A", True)]))
    s = meter.update(20.0, dict([_an("A", True)]))
    assert s.usd_so_far == 0 and s.efficiency is None
    assert s.lines()[0][1].startswith("unknown")


class _Inst:
    def __init__(self, t, acc, n, price, region="r1", cloud="c"):
        self.instance_type, self.accelerator, self.accelerator_count = t, acc, n
        self.region, self.cloud, self._p = region, cloud, price

    def price(self, pricing="on-demand"):
        return self._p


class _Cat:
    def __init__(self, rows):
        self.instances = rows

    def resolve_accelerator(self, name):
        return {"h200": "H200", "h100": "H100"}.get(name.lower())

    def find_instance(self, t, region=None):
        rows = [r for r in self.instances if r.instance_type == t]
        if not rows:
            raise UserError(f"unknown instance type {t!r}")
        return rows


def test_choose_instance_by_name_or_by_detected_devices():
    cat = _Cat([_Inst("p5en", "H200", 8, 80.0, "us"), _Inst("p5en", "H200", 8, 60.0, "eu"),
                _Inst("one", "H200", 1, 10.0), _Inst("h1", "H100", 1, 5.0), _Inst("h1b", "H100", 1, 4.0)])
    c = choose_instance(cat, "p5en")
    assert c.usd_per_hour == 60.0 and c.region == "eu" and "2 regions" in c.note
    assert accelerator_id_for(cat, "NVIDIA H200") == "H200"
    assert accelerator_id_for(cat, "NVIDIA H100 80GB HBM3") == "H100"
    single = choose_instance(cat, device_name="NVIDIA H200", device_count=1)
    assert single.instance_type == "one" and single.usd_per_hour == 10.0
    many = choose_instance(cat, device_name="NVIDIA H100 80GB HBM3", device_count=1)
    assert many.usd_per_hour is None and many.candidates == ("h1", "h1b")
    with pytest.raises(UserError):
        choose_instance(cat, "nope")


def test_real_catalog_prices_an_instance():
    from fleet_tui.core.catalog import load_catalog

    cat = load_catalog(include_user=False)
    c = choose_instance(cat, "p5en.48xlarge")
    assert c.usd_per_hour and c.usd_per_hour > 0 and c.accelerator_count == 8
