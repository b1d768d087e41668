"""A refresh that reads only what changed gives the snapshot a full read gives, ages included, and
makes nothing for the GPUs whose sample time did not move (canned compact answers, no server)."""

from __future__ import annotations

import json

from fleet_tui.core.monitor.serialize import snapshot_to_dict
from fleet_tui.core.monitor.sources.prometheus import PROBE_LABEL, PrometheusSource

NODES = {"node-a": "10.0.0.1:9400", "node-b": "10.0.0.2:9400"}


class CannedFleet:
    """Two nodes of two GPUs; ``scraped[node]`` is its last scrape time and ``util[node]`` the
    utilization it read. Answers each query shape the source sends as Prometheus would."""

    def __init__(self):
        self.now = 1000.0
        self.scraped = {"node-a": 995.0, "node-b": 998.0}
        self.util = {"node-a": 40, "node-b": 70}
        self.fb_free_mib = 80000  # a static fact

    @staticmethod
    def _ids(node: str, gpu: int) -> dict[str, str]:
        return {"Hostname": node, "UUID": f"GPU-{node}-{gpu}", "gpu": str(gpu),
                "instance": NODES[node]}

    def _series(self, labels: dict, value: object) -> dict:
        return {"metric": labels, "value": [self.now, str(value)]}

    def _metrics(self, node: str) -> list[dict]:
        out = []
        for gpu in range(2):
            ids = self._ids(node, gpu)
            out += [self._series({"__name__": "DCGM_FI_DEV_GPU_UTIL", **ids}, self.util[node]),
                    self._series({"__name__": "DCGM_FI_DEV_POWER_USAGE", **ids}, 300 + gpu),
                    self._series({"__name__": "DCGM_FI_DEV_FB_USED", **ids}, 1000)]
        return out

    def _probes(self) -> list[dict]:
        out = [self._series({**self._ids(node, gpu), PROBE_LABEL: "nvidia"}, self.scraped[node])
               for node in NODES for gpu in range(2)]
        return out + [self._series({"__name__": "up", "instance": inst, "job": "dcgm"}, 1)
                      for inst in NODES.values()]

    def answer(self, query: str) -> bytes:
        if "modelName" in query:  # the static facts
            result = [self._series({"__name__": "DCGM_FI_DEV_FB_FREE", **self._ids(n, g),
                                    "modelName": "NVIDIA H100"}, self.fb_free_mib)
                      for n in NODES for g in range(2)]
        elif " and on (" in query:  # the GPUs scraped after a time
            since = float(query.rsplit("> ", 1)[1].rstrip(")"))
            result = [s for n in NODES if self.scraped[n] > since for s in self._metrics(n)]
        elif "max by (__name__" in query:  # everything
            result = [s for n in NODES for s in self._metrics(n)] + self._probes()
        else:  # the sample times
            result = self._probes()
        doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
        return json.dumps(doc, separators=(",", ":")).encode()


def canned_source(fleet: CannedFleet, **kw) -> PrometheusSource:
    src = PrometheusSource("http://127.0.0.1:9", env={}, clock=lambda: fleet.now, **kw)
    src.client.query_body = lambda query, deadline=None: fleet.answer(query)
    return src


def test_changed_only_refresh_equals_a_full_read_and_skips_the_unmoved_gpus():
    fleet = CannedFleet()
    src, full = canned_source(fleet), canned_source(fleet, delta_refresh=False)
    probe_groups: list[int] = []
    grouped = src.query_grouped

    def counting(query, deadline=None, **kw):
        groups, up = grouped(query, deadline, **kw)
        if kw.get("labels") == "probes":
            probe_groups.append(len(groups))
        return groups, up

    src.query_grouped = counting
    snap = src.sample_blocking()
    assert snap.devices == full.sample_blocking().devices  # a full read first
    for step in range(1, 6):
        fleet.now += 2.0
        if step % 2:  # node b scraped again with a new reading; node a's reading only ages
            fleet.scraped["node-b"] = fleet.now - 0.5
            fleet.util["node-b"] += 1
        last = snap if step > 1 else None
        snap, reference = src.sample_blocking(), full.sample_blocking()
        assert not snap.errors and len(snap.devices) == 4
        # values, names and ages alike, as recordings and `monitor --json` write them
        assert snapshot_to_dict(snap)["devices"] == snapshot_to_dict(reference)["devices"]
        ages = {d.node: snap.age_of(d) for d in snap.devices}
        assert ages["node-a"] == fleet.now - 995.0
        if last is not None:  # node a's readings handed on as they are, not copied
            assert [d for d in snap.devices if d.node == "node-a"] == \
                [d for d in last.devices if d.node == "node-a"]
            assert all(a is b for a, b in zip(snap.devices[:2], last.devices[:2]))
    # only the GPUs whose sample time moved became per-GPU objects; the first probe read after
    # a full read compares its own label classifications, so every GPU goes through once
    assert probe_groups == [4, 0, 2, 0, 2]


def test_static_facts_refresh_reads_it_all_again_only_when_facts_moved():
    fleet = CannedFleet()
    src = canned_source(fleet, static_every_s=10.0)
    queries: list[str] = []
    answer = fleet.answer

    def logging(query, deadline=None):
        queries.append("count" if query.startswith("count(") else "static" if "modelName" in query
                       else "changed" if " and on (" in query
                       else "full" if "max by (__name__" in query else "probes")
        return answer(query)

    src.client.query_body = logging
    src.sample_blocking()
    # the fleet's size first (is it past --aggregate-above?), re-counted once a minute
    assert queries == ["count", "full", "static"]
    del queries[0]
    for _ in range(6):  # 12 s: one static refresh, the same facts
        fleet.now += 2.0
        src.sample_blocking()
    assert "full" not in queries[2:] and queries.count("static") == 2
    fleet.now += 12.0  # a fact moved: the next refresh reads it all
    fleet.fb_free_mib = 79000
    queries.clear()
    src.sample_blocking()
    fleet.now += 2.0
    src.sample_blocking()
    assert queries == ["probes", "static", "full"]
