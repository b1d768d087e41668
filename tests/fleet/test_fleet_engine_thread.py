"""The fleet policy's engine analyses off the event loop and keeps only new readings in history;
FleetViews' reuse of unchanged devices gives the view a fresh build gives."""

from __future__ import annotations

import threading
from dataclasses import replace

from fleet_tui.core.fleet import FleetView, FleetViews
from fleet_tui.core.monitor.engine import MonitorEngine
from fleet_tui.core.monitor.snapshot import Snapshot
from fleet_tui.core.monitor.source import Source
from fleet_tui.core.monitor.windowing import FleetWindowPolicy
from tests.fleet.test_fleet_view import dev


def fleet_snapshots(count: int) -> list[Snapshot]:
    """Two nodes; node "a" is scraped every third refresh (its reading repeats, only older), node
    "b" every refresh (a new reading each time)."""
    out = []
    for i in range(count):
        t = 100.0 + 2 * i
        scraped_a = 100.0 + 6 * (i // 3)
        devices = (replace(dev("a", 0, 0, sm=0), timestamp=scraped_a, age_s=t - scraped_a),
                   replace(dev("a", 1, 90 + i // 3, sm=40), timestamp=scraped_a,
                           age_s=t - scraped_a),
                   replace(dev("b", 0, 95 - i, sm=85), timestamp=t, age_s=0.5))
        out.append(Snapshot(timestamp=t, source="s", source_kind="fleet", devices=devices))
    return out


class _Replay(Source):
    kind = "fleet"

    def __init__(self, snapshots: list[Snapshot]):
        self._snapshots = list(snapshots)

    async def sample(self) -> Snapshot:
        return self._snapshots.pop(0)


async def test_fleet_engine_analyses_in_a_thread_and_gives_the_ticks_process_gives():
    snapshots = fleet_snapshots(9)
    engine = MonitorEngine(_Replay(snapshots), interval_s=0.25, alert_rules=[], price=False,
                           policy=FleetWindowPolicy(max_samples=3, stagger_s=4.0))
    loop_thread = threading.get_ident()
    where: dict[str, set[int]] = {"analyze": set(), "history": set()}
    analyze, add = engine.windows.analyze, engine.history.add

    def analyze_where(*args):
        where["analyze"].add(threading.get_ident())
        return analyze(*args)

    def add_where(*args):
        where["history"].add(threading.get_ident())
        return add(*args)

    engine.windows.analyze, engine.history.add = analyze_where, add_where
    ticks = []
    engine.subscribe(ticks.append)
    await engine.run(count=len(snapshots))
    assert where["history"] == {loop_thread}  # the panes read history on the loop
    assert where["analyze"] and loop_thread not in where["analyze"]

    by_hand = MonitorEngine(_Replay([]), alert_rules=[], price=False,
                            policy=FleetWindowPolicy(max_samples=3, stagger_s=4.0))
    for tick, snap in zip(ticks, snapshots):
        again = by_hand.process(snap)
        assert {k: [d.to_dict() for d in a.diagnoses] for k, a in tick.analyses.items()} == \
            {k: [d.to_dict() for d in a.diagnoses] for k, a in again.analyses.items()}
        assert tick.snapshot is snap
    # history keeps each reading once: node a's three scrapes, node b's nine
    a0, b0 = snapshots[0].devices[0].key, snapshots[0].devices[2].key
    assert engine.history.count(a0) == 3 and engine.history.count(b0) == 9


def test_fleet_views_reuse_unchanged_devices_with_their_new_age():
    engine = MonitorEngine(_Replay([]), alert_rules=[], price=False,
                           policy=FleetWindowPolicy(max_samples=3, stagger_s=4.0))
    views = FleetViews({"*": 30.0})
    previous = None
    for snap in fleet_snapshots(9):
        tick = engine.process(snap)
        view = views(tick)
        fresh = FleetView.from_snapshot(snap, tick.analyses, {"*": 30.0})
        assert view.to_dict() == fresh.to_dict()
        assert [view.age_of(d) for d in view.offenders] == \
            [fresh.age_of(d) for d in fresh.offenders] == [d.age_s for d in
                                                           sorted(snap.devices, key=_order(view))]
        if previous is not None:  # the repeated readings kept their device, but not its age
            kept = {d.key: d for d in previous.offenders}
            repeated = (snap.timestamp - 100.0) % 6 != 0  # node "a": scraped every third refresh
            assert (view.node("a") is previous.node("a")) == repeated
            for d in view.offenders:
                if d.node == "a" and repeated:
                    assert d is kept[d.key]
                    assert view.age_of(d) == previous.age_of(d) + 2.0
            assert view.node("b") is not previous.node("b")  # a new reading every refresh
        previous = view


def _order(view):
    rank = {d.key: i for i, d in enumerate(view.offenders)}
    return lambda d: rank[d.key]
