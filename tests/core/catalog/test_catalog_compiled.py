"""The compiled catalog (user cache dir): a hit gives exactly what parsing the TOML gives, any edit
rebuilds it, a corrupt or unwritable cache only costs speed, and offers are built lazily."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_tui.core.catalog import clear_cache, compiled, load_catalog, loading

MINE = """\
[meta]
cloud = "onprem"
source = "test"

[[instance]]
instance_type = "box"
region = "basement"
accelerator = "H100"
accelerator_count = 8
on_demand_usd_per_hour = 20.0
"""


@pytest.fixture(autouse=True)
def _fresh():
    clear_cache()  # the in-process catalog: each load below reads the cache file or the TOML
    yield
    clear_cache()


def _cache_files() -> list[Path]:
    return sorted(compiled.cache_dir().glob("catalog-*.bin"))


def _no_toml(monkeypatch):
    """Make any load from TOML fail: what loads now came from the compiled catalog."""
    def refuse(*_a, **_k):
        raise AssertionError("the catalog was parsed from TOML")

    monkeypatch.setattr(loading, "build_catalog", refuse)


def _same(a, b) -> None:
    assert a.instances == b.instances  # same offers, same order
    assert a.accelerators == b.accelerators and list(a.accelerators) == list(b.accelerators)
    assert a.models == b.models and list(a.models) == list(b.models)
    assert (a.problems, a.sources, a.files) == (b.problems, b.sources, b.files)


def test_a_cache_hit_equals_the_toml_load(monkeypatch):
    from_toml = load_catalog(reload=True)
    assert len(_cache_files()) == 1
    clear_cache()
    _no_toml(monkeypatch)
    cached = load_catalog()
    _same(cached, from_toml)
    assert cached.accelerator("h100").id == "H100" and cached.model("llama-3.1-8b").id == "llama-3.1-8b"


def test_offers_are_built_per_accelerator_on_demand(monkeypatch):
    from_toml = load_catalog(reload=True)
    clear_cache()
    cached = load_catalog()
    assert cached.offer_count == len(from_toml.instances)
    h100 = cached.offers_of("H100")
    assert h100 == [i for i in from_toml.instances if i.accelerator == "H100"] and h100
    assert cached.offers_of("no-such-device") == []
    assert cached.instances == from_toml.instances
    assert cached.find_instance("p5.48xlarge") == from_toml.find_instance("p5.48xlarge")


def test_editing_a_toml_file_rebuilds(tmp_path, monkeypatch):
    extra = tmp_path / "mine"
    extra.mkdir()
    f = extra / "mine.toml"
    f.write_text(MINE)
    first = load_catalog([extra])
    assert first.find_instance("box")[0].on_demand_usd_per_hour == 20.0
    f.write_text(MINE.replace("20.0", "25.0"))
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    clear_cache()
    assert load_catalog([extra]).find_instance("box")[0].on_demand_usd_per_hour == 25.0
    clear_cache()
    _no_toml(monkeypatch)  # and the rebuilt cache serves the next load
    assert load_catalog([extra]).find_instance("box")[0].on_demand_usd_per_hour == 25.0


def test_adding_or_removing_a_file_rebuilds(tmp_path):
    extra = tmp_path / "mine"
    (extra / "instances").mkdir(parents=True)
    before = load_catalog([extra])
    (extra / "instances" / "onprem.toml").write_text(MINE)
    clear_cache()
    added = load_catalog([extra])
    assert len(added.instances) == len(before.instances) + 1
    (extra / "instances" / "onprem.toml").unlink()
    clear_cache()
    assert len(load_catalog([extra]).instances) == len(before.instances)


def test_a_file_compiled_under_another_key_is_stale():
    cat = load_catalog()
    data = compiled.compile_catalog(cat, ("another", "key"))
    assert compiled.parse_compiled(data, ("another", "key")) is not None
    assert compiled.parse_compiled(data, ("the", "current", "key")) is None


def test_a_file_of_an_older_format_is_rebuilt_without_a_warning(caplog, monkeypatch):
    from_toml = load_catalog()
    (path,) = _cache_files()
    path.write_bytes(b"fleet-tui catalog\n" + b"\x00" * 64)  # format 1 (pickled pydantic models)
    monkeypatch.setattr(compiled, "_warned", False)
    clear_cache()
    with caplog.at_level(logging.WARNING, logger=compiled.__name__):
        _same(load_catalog(), from_toml)
    assert not [r for r in caplog.records if r.name == compiled.__name__]
    assert path.read_bytes().startswith(b"fleet-tui catalog %d\n" % compiled.FORMAT)  # rewritten


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "empty"])
def test_a_corrupt_cache_falls_back_rebuilds_and_warns_once(damage, caplog, monkeypatch):
    from_toml = load_catalog()
    (path,) = _cache_files()
    data = path.read_bytes()
    path.write_bytes({"garbage": b"not a catalog at all",
                      "truncated": data[: len(data) // 2],
                      "flipped": data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:],
                      "empty": b""}[damage])
    monkeypatch.setattr(compiled, "_warned", False)
    clear_cache()
    with caplog.at_level(logging.WARNING, logger=compiled.__name__):
        again = load_catalog()
        _same(again, from_toml)
        path.write_bytes(b"broken again")
        clear_cache()
        load_catalog()
    warnings = [r.getMessage() for r in caplog.records if r.name == compiled.__name__]
    assert len(warnings) == 1 and str(path) in warnings[0] and "rebuilt from the TOML" in warnings[0]
    clear_cache()
    _no_toml(monkeypatch)  # the rebuilt file is whole again
    _same(load_catalog(), from_toml)


def test_an_unwritable_cache_dir_still_loads(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    cat = load_catalog()
    assert cat.problems == [] and len(cat.instances) > 1000
    clear_cache()
    assert load_catalog().instances == cat.instances


def test_concurrent_processes_share_one_whole_cache_file(tmp_path):
    code = ("from fleet_tui.core.catalog import load_catalog; c = load_catalog(include_user=False); "
            "print(len(c.instances), len(c.problems))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert len({out for out, _ in outs}) == 1 and not any(err for _, err in outs), outs
    files = list((tmp_path / "cache" / "fleet-tui").iterdir())
    assert [f.name for f in files if f.name.endswith(".bin")] and not [f for f in files if f.suffix == ".tmp"]


def test_a_small_table_is_cached_and_rebuilt_when_its_file_changes(tmp_path):
    from fleet_tui.core import paths
    from fleet_tui.core.interconnects import load_interconnects

    table = tmp_path / "interconnects.toml"
    table.write_bytes((paths.bundled_catalog_dir() / "interconnects.toml").read_bytes())
    load_interconnects.cache_clear()
    first = load_interconnects(table)
    assert sorted(compiled.cache_dir().glob("interconnects-*.bin"))  # saved beside the catalog
    load_interconnects.cache_clear()
    assert load_interconnects(table) == first  # read back whole
    text = table.read_text()
    table.write_text(text + '\n[[cloud]]\ncloud = "testcloud"\ntier = "marketplace"\n'
                     'reliability = "varies"\nsource = "test"\n')
    load_interconnects.cache_clear()
    assert "testcloud" in load_interconnects(table).clouds and "testcloud" not in first.clouds
    load_interconnects.cache_clear()


def test_the_cache_dir_keeps_the_newest_files_only(tmp_path, monkeypatch):
    """One file per directory list: loads with ever new --catalog-dir lists (a test suite's temp
    dirs filled a developer's cache with 1,559 of them, 879 MB) keep KEEP_FILES, the newest, and a
    crashed writer's old temp file goes; a fresh one (a writer at work) stays."""
    cache = compiled.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    stale, fresh = cache / ".catalog-0.bin.x.tmp", cache / ".catalog-1.bin.y.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    old = os.stat(stale).st_mtime - compiled.STALE_TEMP_S - 60
    os.utime(stale, (old, old))
    written = []
    for i in range(compiled.KEEP_FILES + 3):
        extra = tmp_path / f"dir{i}"
        extra.mkdir()
        clear_cache()
        load_catalog([extra])
        written.append(compiled.cache_path(loading.catalog_dirs([extra])))
        os.utime(written[-1], (1_000_000 + i, 1_000_000 + i))  # distinct ages, oldest first
    assert _cache_files() == sorted(written[-compiled.KEEP_FILES:])
    assert not stale.exists() and fresh.exists()
    clear_cache()
    _no_toml(monkeypatch)  # the newest is still read from its cache file
    assert load_catalog([tmp_path / f"dir{compiled.KEEP_FILES + 2}"]).instances
