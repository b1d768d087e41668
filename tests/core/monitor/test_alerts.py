"""Alert rules: TOML parsing with file:line errors, duration, de-duplication with cooldown."""

from __future__ import annotations

import pytest

from fleet_tui.core.errors import UserError
from fleet_tui.core.monitor.alerts import (
    AlertEvaluator,
    AlertRule,
    load_alert_rules,
    parse_duration,
    parse_rules_file,
    strict_rules,
)
from fleet_tui.core.monitor.analysis import analyze_device_window
from fleet_tui.core.monitor.snapshot import DeviceSnapshot


def _dev(util: float, t: float = 0.0, **kw) -> DeviceSnapshot:
    return DeviceSnapshot(index=0, name="G", uuid="U", timestamp=t, gpu_util_pct=util, **kw)


def test_bundled_rules_load_with_the_practice_defaults():
    rules, problems = load_alert_rules(include_user=False)
    assert problems == []
    by = {r.name: r for r in rules}
    assert by["gpu-util-high"].metric == "gpu_util_pct" and by["gpu-util-high"].threshold == 90
    assert by["gpu-util-high"].duration_s == 600
    assert by["memory-high"].threshold == 85 and by["memory-high"].duration_s == 300
    assert by["cost-per-day"].machine_wide
    assert any(r.diagnosis for r in rules)


def test_durations():
    assert parse_duration("10m") == 600 and parse_duration("1.5h") == 5400
    assert parse_duration(30) == 30 and parse_duration("2d") == 172800
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_bad_rules_are_reported_with_file_line_and_skipped(tmp_path):
    f = tmp_path / "alerts.toml"
    f.write_text(
        '[[rule]]\nname = "ok"\nmetric = "temp_c"\nthreshold = 80\nduration = "1m"\n\n'
        '[[rule]]\nname = "bad-metric"\nmetric = "gpu_utl_pct"\nthreshold = 1\n\n'
        '[[rule]]\nname = "bad-dur"\ndiagnosis = "idle"\nduration = "forever"\n\n'
        '[[rule]]\nname = "bad-sev"\ndiagnosis = "idel"\nseverity = "loud"\n')
    rules, problems = parse_rules_file(f)
    assert [r.name for r in rules] == ["ok"]
    text = "\n".join(problems)
    assert f"{f}:9: rule[1].metric" in text and "gpu_util_pct" in text  # suggestion
    assert f"{f}:15: rule[2].duration" in text
    assert "rule[3].diagnosis" in text and "'idle'" in text
    assert "rule[3].severity" in text
    with pytest.raises(UserError, match="bad alert rules"):
        strict_rules([f])


def test_syntax_error_names_the_line(tmp_path):
    f = tmp_path / "a.toml"
    f.write_text('[[rule]]\nname = "x"\nmetric = \n')
    rules, problems = parse_rules_file(f)
    assert rules == [] and problems and f"{f}:3" in problems[0]


def test_user_file_overrides_and_disables(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "fleet-tui").mkdir()
    (tmp_path / "fleet-tui" / "alerts.toml").write_text(
        '[[rule]]\nname = "gpu-util-high"\nmetric = "gpu_util_pct"\nthreshold = 50\n'
        '[[rule]]\nname = "idle-gpu"\ndiagnosis = "idle"\nenabled = false\n')
    rules, problems = load_alert_rules()
    by = {r.name: r for r in rules}
    assert problems == [] and by["gpu-util-high"].threshold == 50 and "idle-gpu" not in by


def test_duration_then_cooldown_dedup_then_reset():
    rule = AlertRule(name="hot", severity="warning", duration_s=10, cooldown_s=30,
                     metric="gpu_util_pct", op=">", threshold=90)
    ev = AlertEvaluator([rule])
    fired = []
    for t in range(0, 100):
        fired += [(t, a) for a in ev.evaluate(float(t), [_dev(95.0, t)])]
    # first after 10 s of holding, then once per 30 s cooldown while it holds
    assert [t for t, _ in fired] == [10, 40, 70]
    a = fired[0][1]
    assert a.since == 0 and a.at == 10 and a.value == 95.0 and a.device_index == 0
    assert a.to_dict()["rule"] == "hot"
    # condition clears -> timer resets: needs another full duration
    ev2 = AlertEvaluator([rule])
    seq = [95.0] * 8 + [10.0] + [95.0] * 12
    times = [t for t, u in enumerate(seq) for _ in ev2.evaluate(float(t), [_dev(u, t)])]
    assert times == [19]


def test_diagnosis_and_machine_rules():
    rule = AlertRule(name="idle", severity="info", duration_s=2, cooldown_s=100, diagnosis="idle")
    cost = AlertRule(name="cost", severity="info", duration_s=0, cooldown_s=100,
                     metric="cost_usd_per_day", op=">", threshold=100)
    ev = AlertEvaluator([rule, cost])
    out = []
    for t in range(5):
        d = _dev(0.0, t, sm_active_pct=0.0)
        an = analyze_device_window([d])
        out += ev.evaluate(float(t), [d], {d.key: an}, {"cost_usd_per_day": 2000.0})
    assert [a.rule for a in out] == ["cost", "idle"]
    assert out[0].device_key == "machine" and out[1].at == 2


def test_a_repeated_reading_is_skipped_only_while_nothing_holds_on_it():
    """A fleet repeats each device's last scrape (same sample time) between scrapes: a quiet one
    is not looked at again, but a held timer still runs to its duration, and a new reading counts."""
    hot = AlertRule(name="hot", severity="warning", duration_s=6, cooldown_s=100,
                    metric="gpu_util_pct", op=">", threshold=90)
    idle = AlertRule(name="idle", severity="info", duration_s=6, cooldown_s=100, diagnosis="idle")
    ev = AlertEvaluator([hot, idle])
    fired, analysed = [], {}
    # a scrape every 5 s, a refresh every second: 0-9 s cool and busy, 10-24 s hot, then idle
    for t in range(40):
        scrape = 1000.0 + t - t % 5
        util = 50.0 if scrape < 1010 else 95.0 if scrape < 1025 else 0.0
        d = _dev(util, scrape, sm_active_pct=util)
        an = analysed.setdefault(scrape, analyze_device_window([d]))  # kept, as the fleet does
        fired += [(t, a.rule) for a in ev.evaluate(1000.0 + t, [d], {d.key: an})]
    assert fired == [(16, "hot"), (31, "idle")]


def test_holding_lists_conditions_held_past_their_duration_until_they_clear():
    rule = AlertRule(name="hot", severity="warning", duration_s=10, cooldown_s=30,
                     metric="gpu_util_pct", op=">", threshold=90)
    ev = AlertEvaluator([rule])
    for t in range(0, 9):
        ev.evaluate(float(t), [_dev(95.0, t)])
    assert ev.holding(8.0) == []  # held, but not yet for 10 s
    for t in range(9, 15):
        ev.evaluate(float(t), [_dev(95.0, t)])
    held = ev.holding(14.0)
    assert [(r.name, since) for r, _key, since in held] == [("hot", 0.0)]
    ev.evaluate(15.0, [_dev(10.0, 15)])  # condition clears
    assert ev.holding(15.0) == []


def _idle_dev(key, index, util):
    from fleet_tui.core.monitor.snapshot import DeviceSnapshot

    return DeviceSnapshot(index=index, name="GPU", uuid=key, vendor="nvidia", node=key.split("/")[0],
                          timestamp=0.0, gpu_util_pct=util)


def test_job_rule_fires_for_a_job_holding_enough_idle_devices_long_enough(tmp_path):
    from fleet_tui.core.monitor.alerts import AlertEvaluator

    f = tmp_path / "alerts.toml"
    f.write_text('[[rule]]\nname = "job-idle"\nmetric = "gpu_util_pct"\nop = "<"\nthreshold = 1\n'
                 'min_devices = 3\nduration = "10m"\n\n'
                 '[[rule]]\nname = "bad"\ndiagnosis = "idle"\nmin_devices = 0\n')
    rules, problems = parse_rules_file(f)
    assert [r.name for r in rules] == ["job-idle"] and rules[0].per_job
    assert "min_devices" in problems[0]
    devices = [_idle_dev(f"n{i // 4}/{i % 4}", i % 4, 0.0 if i < 6 else 50.0) for i in range(8)]
    jobs = {"big": [d.key for d in devices[:4]],  # 4 idle devices
            "small": [d.key for d in devices[4:6]],  # 2 idle: under min_devices
            "busy": [d.key for d in devices[6:]]}
    ev = AlertEvaluator(rules)
    devs = devices
    assert ev.evaluate(0.0, devs, jobs=jobs) == []  # the timer starts
    assert ev.evaluate(300.0, devs, jobs=jobs) == []
    (alert,) = ev.evaluate(600.0, devs, jobs=jobs)
    assert alert.device_key == "job:big" and "job big: 4 of its 4 devices" in alert.message
    # without jobs the job rule is not evaluated, and device evaluation ignores it
    assert ev.evaluate(900.0, devs) == []


def _alert(rule: str, node: str, gpu: int, severity: str = "warning", text: str = "hot"):
    from fleet_tui.core.monitor.alerts import Alert

    return Alert(rule=rule, severity=severity, message=f"GPU {gpu} (NVIDIA H200): {text}",
                 device_key=f"{node}/GPU-{node}-{gpu}", device_index=gpu, at=1.0, since=0.0)


def test_a_rule_fired_on_many_devices_is_one_notice_naming_count_and_nodes():
    from fleet_tui.core.monitor.alert_notices import alert_notices

    many = [_alert("memory-high", f"gpu-node-{n:03d}", g, text="Device memory above 85%")
            for n in range(64) for g in range(8)]
    few = [_alert("gpu-hot", "gpu-node-007", 3, severity="critical", text="91 °C")]
    notices = alert_notices(many + few)
    assert [n.alerts for n in notices] == [1, 512]  # the critical one first, then the group
    hot, mem = notices
    assert hot.severity == "critical" and hot.title == "gpu-hot (GPU 3) on gpu-node-007"
    assert hot.message == "GPU 3 (NVIDIA H200): 91 °C"
    assert mem.title == "memory-high on 512 devices"
    assert mem.message == ("512 devices on 64 nodes (gpu-node-000, gpu-node-001, gpu-node-002 and "
                           "61 more): Device memory above 85%")


def test_a_few_devices_are_told_one_by_one_and_too_many_rules_are_folded():
    from fleet_tui.core.monitor.alert_notices import NOTICE_LIMIT, alert_notices

    three = [_alert("ecc", "n1", g, severity="critical") for g in range(3)]
    assert [n.title for n in alert_notices(three)] == [f"ecc (GPU {g}) on n1" for g in range(3)]
    this_box = alert_notices([_alert("gpu-hot", "", 1)])  # key "/GPU--1": this machine, no node
    assert [n.title for n in this_box] == ["gpu-hot (GPU 1)"]
    rules = three + [_alert(f"rule{i}", "n2", 0, severity="info") for i in range(5)]
    notices = alert_notices(rules)
    assert len(notices) == NOTICE_LIMIT
    assert [n.severity for n in notices[:3]] == ["critical"] * 3
    folded = notices[-1]
    assert folded.alerts == 5 and folded.title == "5 more alerts" and folded.severity == "info"
    assert folded.message == "Rules: rule0, rule1, rule2, rule3, rule4."
    assert sum(n.alerts for n in notices) == len(rules)
