"""``--network`` on ``recommend`` as on ``size``: one parser, the same links, the same answer for the
same multi-node job, with and without the flag."""

from __future__ import annotations

import json

import pytest

from fleet_tui.cli import main
from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.catalog.models import Catalog
from fleet_tui.core.interconnects import UNKNOWN_INTER_GBPS, default_fabric
from fleet_tui.core.plan.build import PlanRequest, plan_workload
from fleet_tui.core.ranking import recommend
from fleet_tui.core.ranking.offers import RankedOffer
from fleet_tui.core.workload import Workload, parse_workload

JOB = {"model": "llama-2-70b", "workload": "training", "batch": 2048, "seq_len": 2048,
       "grad_checkpointing": True}
JOB_FLAGS = ["--model", "llama-2-70b", "--workload", "training", "--batch", "2048", "--seq-len", "2048",
             "--grad-checkpointing"]


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog([])


@pytest.fixture(scope="module")
def job(cat: Catalog) -> Workload:
    return parse_workload(dict(JOB), cat)


def _multi_node_offer(job: Workload, cat: Catalog, network: str | None) -> RankedOffer:
    """recommend's best multi-instance offer for ``job``; with ``network``, the same instance type
    and instance count as without it (the same job, on a network the user names)."""
    offers = recommend(job, cat, top=60).offers
    first = next(o for o in offers if o.instances > 1 and o.tokens_per_s)
    if network is None:
        return first
    return next(o for o in recommend(job, cat, top=2000, network=network).offers
                if (o.cloud, o.instance_type, o.instances) == (first.cloud, first.instance_type, first.instances))


@pytest.mark.parametrize("network", [None, "3200G", "400G/gpu", "ib-ndr", "100G", "efa"])
def test_size_and_recommend_agree_on_a_multi_node_job(cat: Catalog, job: Workload, network: str | None) -> None:
    offer = _multi_node_offer(job, cat, network)
    sized = plan_workload(PlanRequest(job.derive(gpus=offer.gpus, sharding="fsdp"), offer.accelerator,
                                      network=network), cat)
    # size prices the same instance type with or without the flag; the flag only sets its network
    assert sized.cost is not None and sized.cost.instance.instance_type == offer.instance_type
    assert sized.speed is not None and sized.speed.tokens_per_s == pytest.approx(offer.tokens_per_s, rel=1e-6)


def test_the_named_network_sets_the_speed_between_nodes(cat: Catalog, job: Workload) -> None:
    def speed(network: str) -> float:
        tokens = _multi_node_offer(job, cat, network).tokens_per_s
        assert tokens is not None
        return tokens

    per_node = speed("3200G")
    assert speed("400G/gpu") == pytest.approx(per_node, rel=1e-9)  # 8 devices per node x 400 Gbit/s
    assert speed("100G") < 0.5 * per_node


def _cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_recommend_and_size_cli_agree_with_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    plain = _cli_json(["recommend", *JOB_FLAGS, "--top", "60", "--json"], capsys)
    first = next(o for o in plain["offers"] if o["instances"] > 1 and o["tokens_per_s"])
    rec = _cli_json(["recommend", *JOB_FLAGS, "--network", "100G", "--gpu", first["accelerator"], "--cloud",
                     first["cloud"], "--top", "500", "--json"], capsys)
    offer = next(o for o in rec["offers"] if o["instance_type"] == first["instance_type"]
                 and o["instances"] == first["instances"])
    assert any("100 Gbit/s per node" in n for n in rec["notes"])
    assert offer["tokens_per_s"] < first["tokens_per_s"]
    size = _cli_json(["size", *JOB_FLAGS, "--gpus", str(offer["gpus"]), "--gpu",
                      offer["accelerator"], "--network", "100G", "--json"], capsys)
    assert size["throughput"]["tokens_per_s"] == pytest.approx(offer["tokens_per_s"], rel=1e-6)
    assert "--network 100G" in size["throughput"]["links"]


@pytest.mark.parametrize("bad", ["fast", "0G", "9e9G"])
def test_a_bad_network_on_recommend_names_the_flag(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recommend", *JOB_FLAGS, "--network", bad]) == 2
    err = capsys.readouterr().err
    assert "--network" in err and "Traceback" not in err


def test_a_multi_slice_v5p_job_is_charged_its_dcn_not_an_unknown_network() -> None:
    fab = default_fabric("TPU-v5p", "XLA")
    assert fab.inter_known and "DCN" in fab.inter_link
    assert fab.inter_gbps > UNKNOWN_INTER_GBPS * fab.node_devices
