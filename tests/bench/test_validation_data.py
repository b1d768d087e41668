"""The issue-9 validation set (tests/fixtures/validation/*.toml) is well formed.

These files hold third-party published measurements (serving throughput, vLLM KV capacity,
fine-tuning memory). The models are fitted on the "tune" rows and judged on the "holdout" rows, so
every row must say where its number comes from and which side of the split it is on.
"""

import random

import pytest
import tomllib

from fleet_tui.core.catalog import load_catalog
from tests.paths import TESTS

VALIDATION = TESTS / "fixtures" / "validation"
FILES = {
    "serving.toml": ("measurement", ("value",)),
    "serving_amd.toml": ("measurement", ("value",)),
    "serving_bursts.toml": ("measurement", ("value",)),
    "serving_latency.toml": ("measurement", ("value",)),
    "kv_capacity.toml": ("capacity", ("kv_tokens", "gpu_blocks", "kv_cache_gib")),
    "finetune_memory.toml": ("run", ("value",)),
}
# numeric fields that, when present, must be positive
POSITIVE = (
    "value", "gpu_count", "tp", "pp", "input_len", "output_len", "kv_tokens", "gpu_blocks",
    "kv_cache_gib", "weights_gb", "weights_gib", "max_concurrency", "batch_size", "seq_len",
    "tokens_per_s", "gpu_memory_gb", "gpu_total_memory_gib", "requests",
)


def _rows(name: str) -> list[dict]:
    table, _ = FILES[name]
    with open(VALIDATION / name, "rb") as fh:
        return tomllib.load(fh)[table]


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_row_has_an_id_a_source_and_a_split(name):
    rows = _rows(name)
    assert rows, name
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for r in rows:
        assert r["source"].startswith("https://"), r["id"]
        assert r["source_detail"].strip(), r["id"]
        assert r["split"] in ("tune", "holdout"), r["id"]


@pytest.mark.parametrize("name", sorted(FILES))
def test_numbers_are_positive(name):
    _, measured = FILES[name]
    for r in _rows(name):
        assert any(key in r for key in measured), r["id"]
        for key in POSITIVE:
            value = r.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert value > 0, (r["id"], key)


# Rows added to a file after its holdout was judged are split among themselves (file order), so
# adding rows never moves a judged holdout row into the fit: the size of each batch, in order.
BATCHES = {"kv_capacity.toml": (10, 16)}


@pytest.mark.parametrize("name", sorted(FILES))
def test_split_is_the_documented_seeded_shuffle_and_about_two_to_one(name):
    rows = _rows(name)
    expected_holdout, start = set(), 0
    for size in BATCHES.get(name, (len(rows),)):
        ids = sorted(r["id"] for r in rows[start:start + size])
        random.Random(9).shuffle(ids)
        expected_holdout |= set(ids[: round(len(ids) / 3)])
        start += size
    assert start == len(rows), "a batch of rows without its split (BATCHES)"
    holdout = {r["id"] for r in rows if r["split"] == "holdout"}
    assert holdout == expected_holdout
    share = len(holdout) / len(rows)
    assert 0.25 <= share <= 0.40, share


def test_serving_rows_name_a_known_engine_and_a_catalog_accelerator():
    catalog = load_catalog(include_user=False)
    for r in _rows("serving.toml") + _rows("serving_amd.toml") + _rows("serving_bursts.toml"):
        assert r["engine"] in ("trtllm", "vllm", "sglang"), r["id"]
        assert catalog.resolve_accelerator(r["gpu"]) is not None, r["id"]
        if r.get("tp"):
            assert r["tp"] <= r["gpu_count"], r["id"]


def test_kv_and_finetune_rows_name_their_hardware():
    catalog = load_catalog(include_user=False)
    for r in _rows("kv_capacity.toml"):
        assert r["engine"] in ("vllm", "sglang"), r["id"]
        assert r["gpu"] == "unknown" or catalog.resolve_accelerator(r["gpu"]) is not None, r["id"]
    for r in _rows("finetune_memory.toml"):
        assert r.get("gpu") or r.get("gpu_memory_gb"), r["id"]
        if r.get("gpu") and r["gpu"] != "unknown":
            assert catalog.resolve_accelerator(r["gpu"]) is not None, r["id"]
