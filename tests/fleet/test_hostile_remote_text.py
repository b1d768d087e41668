"""Text from the network is data: a Prometheus label holding an escape sequence or a newline, and
an HTTP 500 body's ``error`` field, reach no terminal raw from ``fleet``, ``monitor`` or ``jobs``
(real HTTP servers on 127.0.0.1; the commands run in-process through ``cli.main``)."""

from __future__ import annotations

import json

import pytest

from fleet_tui.cli import main
from tests.fleet.hostile import http_server

EVIL_HOST = "node\x1b]0;pwned\x07"
EVIL_JOB = "train\nforged-row 99 GPUs"


def _vector(*series: tuple[dict[str, str], str]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [1.0, v]} for m, v in series]}}).encode()


def _labelled_answer(handler):
    labels = {"gpu": "0", "UUID": "GPU-evil", "Hostname": EVIL_HOST, "instance": "10.0.0.1:9400",
              "modelName": "NVIDIA H100\x1b[2J", "job": EVIL_JOB, "hpc_job": EVIL_JOB}
    return 200, {"Content-Type": "application/json"}, _vector(
        ({"__name__": "DCGM_FI_DEV_GPU_UTIL", **labels}, "42"),
        ({"__name__": "DCGM_FI_DEV_FB_USED", **labels}, "1000"),
        ({"__name__": "up", "instance": "10.0.0.1:9400", "job": "dcgm"}, "1"))


@pytest.fixture
def evil_prometheus():
    server, url = http_server(_labelled_answer)
    yield url
    server.shutdown()


@pytest.mark.parametrize("argv", [
    ["fleet", "--timeout", "3"],
    ["fleet", "--timeout", "3", "--json"],
    ["monitor", "--once"],
    ["jobs", "--timeout", "3"],
])
def test_labels_with_escape_codes_and_newlines_are_shown_as_text(argv, evil_prometheus, capsys):
    code = main([*argv, "--source", f"prometheus:{evil_prometheus}"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code in (0, 2), text
    assert "Traceback" not in text
    assert "\x1b" not in text and "\x07" not in text  # nothing the terminal would act on
    if "--json" in argv:  # JSON keeps the label as received, escaped by the encoder
        assert "\\u001b]0;pwned\\u0007" in out.out
    else:
        assert "forged-row" not in text or all(
            not line.startswith("forged-row") for line in text.splitlines())  # no row of its own


def test_an_error_body_is_shown_without_its_control_characters(capsys):
    body = json.dumps({"status": "error", "errorType": "internal",
                       "error": "boom\x1b]0;pwned\x07\nfleet-tui: all good"}).encode()
    server, url = http_server(lambda h: (500, {"Content-Type": "application/json"}, body))
    try:
        for argv in (["monitor", "--once"], ["fleet", "--timeout", "2"], ["jobs", "--timeout", "2"]):
            code = main([*argv, "--source", f"prometheus:{url}"])
            out = capsys.readouterr()
            text = out.out + out.err
            assert code == 2, (argv, text)
            assert "\x1b" not in text and "\x07" not in text, argv
            assert "Traceback" not in text
            assert not any(line.startswith("fleet-tui: all good") for line in text.splitlines())
    finally:
        server.shutdown()
