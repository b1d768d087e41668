"""scripts/capture_corpus.py without a GPU: the sampler on the fake pynvml (real ctypes structs,
values from the labelled H200 trace), and the runner's labelling with stand-in workloads."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import types

import pytest

from fleet_tui.core.monitor.trace import load_trace
from tests.paths import REPO

ROOT = REPO
sys.path.insert(0, str(ROOT))  # `tests.fakes` under plain `pytest` too
from tests.fakes.fake_pynvml import FakeNvml  # noqa: E402


def _nvml():
    fake = FakeNvml.h200()
    fake.module.nvmlInit()
    return fake


@pytest.fixture(scope="module")
def capture():
    spec = importlib.util.spec_from_file_location("capture_corpus",
                                                  ROOT / "scripts" / "capture_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["capture_corpus"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


FAKE_PSUTIL = types.SimpleNamespace(cpu_percent=lambda percpu: [100.0, 20.0],
                                    virtual_memory=lambda: types.SimpleNamespace(percent=12.5))


def test_sampler_writes_the_bundled_trace_format_with_labels(capture, tmp_path):
    fake = _nvml()
    out = io.StringIO()
    clock = _Clock()
    s = capture.Sampler(fake.module, out, clock=clock, psutil=FAKE_PSUTIL)
    static = s.open()
    assert static["gpm_supported"] and static["memory_total_bytes"] > 100 * 2**30
    for i, label in enumerate(["idle_gap", "matmul_bf16", "matmul_bf16"]):
        s.label = label
        fake.advance(60)  # into the trace's compute phase
        clock.t += 0.2
        row = s.sample_once()
        assert row["phase"] == label and row["t"] == pytest.approx(0.2 * (i + 1))
    assert "gpm_sm_util" in row and "gpm_any_tensor_util" in row
    assert row["host_cpu_per_core_pct"] == [100.0, 20.0] and row["host_cpu_pct"] == 60.0
    path = tmp_path / "c.jsonl"
    path.write_text(out.getvalue())
    snaps = load_trace(path)  # fleet-tui reads it as is
    assert [x.devices[0].phase for x in snaps] == ["idle_gap", "matmul_bf16", "matmul_bf16"]
    assert snaps[-1].devices[0].sm_active_pct is not None
    assert snaps[-1].host.cpu_per_core_pct == (100.0, 20.0)


def test_runner_labels_each_workload_and_the_gaps(capture, monkeypatch):
    fake = _nvml()
    out = io.StringIO()
    s = capture.Sampler(fake.module, out, interval=0.001)
    s.open()
    seen = []

    def stand_in(torch, seconds):
        seen.append(s.label)

    monkeypatch.setitem(capture.WORKLOADS, "matmul_bf16",
                        capture.Workload(("healthy_compute",), stand_in))
    no_cuda_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(empty_cache=lambda: None))
    result = capture.run_plan(s, ["idle", "matmul_bf16", "small_kernels"], no_cuda_torch,
                              seconds=0.0, gap=0.0, sleep=lambda _s: None)
    assert seen == ["matmul_bf16"]
    assert result[1] == ("matmul_bf16", "ok")
    assert result[2][0] == "small_kernels" and result[2][1].startswith("failed")  # no CUDA here
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    labels = next(x for x in lines if x["kind"] == "labels")["labels"]
    assert labels["matmul_bf16"]["expected"] == ["healthy_compute"]
    assert labels["idle_gap"]["expected"] == ["idle"]
    # without torch, workloads that need it are skipped and said so
    s2 = capture.Sampler(fake.module, io.StringIO(), interval=0.001)
    s2.open()
    r = capture.run_plan(s2, ["idle", "matmul_fp32"], None, seconds=0.0, gap=0.0,
                         sleep=lambda _s: None)
    assert r == [("idle", "ok"), ("matmul_fp32", "skipped: needs torch with CUDA")]


def test_every_workload_expects_known_kinds(capture):
    from fleet_tui.core.monitor.analysis import KINDS

    for take, build in capture.TAKES.items():
        for name, w in build().items():
            assert set(w.expected) | set(w.risks) | set(w.no_risks) <= set(KINDS), (take, name)


def test_the_holdout_take_differs_from_the_tune_take_and_lists(capture, capsys):
    a, b = capture.TAKES["a"](), capture.TAKES["b"]()
    assert set(a) != set(b)  # other worker counts and dtypes, not only other sizes
    assert {"idle", "slow_leak", "alloc_staircase", "hbm_copy"} <= set(a) & set(b)
    assert capture.main(["--take", "b", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert "loader_w4" in listed and "loader_w8" not in listed
    assert capture.main(["--take", "b", "--only", "loader_w8"]) == 2  # not in take b
