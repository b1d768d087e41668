"""What users see does not change by accident: the README's offline commands and a spread of
sizing, ranking, catalog and analysis calls print exactly what they printed when the golden files
were written (``tests/fixtures/golden/``).

A change that means to alter an output regenerates the files and the diff shows in review::

    FLEET_TUI_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_golden.py
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from fleet_tui.cli import main

GOLDEN = Path(__file__).parent / "fixtures" / "golden"

COMMANDS = [
    # The README's headless section (offline lines).
    "catalog instances --filter 'cloud=aws,accelerator=H100,price<60' --sort price --limit 10",
    "catalog accelerators --filter 'bf16>=900' --json",
    "catalog models",
    "size --model llama-3.1-70b --workload qlora --seq-len 2048 --batch 4 --grad-checkpointing --gpu L40S --gpus 2",
    "size --model llama-3.1-70b --workload qlora --seq-len 2048 --batch 4 --grad-checkpointing --gpu L40S --gpus 2"
    " --json",
    "recommend --model llama-3.1-8b --prompt-len 1024 --gen-len 256 --batch 16 --current p5.48xlarge --top 10"
    " --explain",
    "recommend --model llama-3.1-8b --prompt-len 1024 --gen-len 256 --batch 16 --current p5.48xlarge --top 10 --json",
    "recommend --model llama-3.1-70b --workload lora --seq-len 2048 --batch 4 --grad-checkpointing --pricing any"
    " --schedule 8x22 --cloud aws,gcp --markdown",
    "scenarios list",
    "scenarios run inference_small_p5",
    "analyze demo --window 5 --json",
    "analyze demo",
    # A spread of workloads, precisions and devices.
    "size --model llama-3.1-8b --workload inference --prompt-len 1024 --gen-len 256 --gpu H100 --json",
    "size --model llama-3.1-8b --workload training --seq-len 4096 --batch 8 --gpu A100-80GB --gpus 4 --json",
    "size --model llama-3.1-8b --workload lora --seq-len 2048 --batch 2 --gpu L4 --json",
    "size --model llama-3.1-405b --workload inference --precision fp16 --gpu T4 --json",
    "size --model llama-3.1-70b --workload qlora --seq-len 2048 --batch 4 --gpu L40S --gpus 2 --sharding fsdp --json",
    "size --model llama-3.1-8b --workload finetune --seq-len 2048 --batch 4 --gpu A100-80GB --gpus 2",
    "recommend --model llama-3.1-70b --workload lora --seq-len 2048 --batch 4 --grad-checkpointing --top 8 --json",
    "recommend --model llama-3.1-8b --workload training --seq-len 2048 --batch 8 --top 8",
    "catalog instances --filter 'accelerator=MI300X' --json",
    "catalog instances --sort price --limit 25",
]


def _slug(command: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", command.lower()).strip("_")[:120]


@pytest.mark.parametrize("command", COMMANDS)
def test_output_is_unchanged(command, capsys):
    code = main(shlex.split(command))
    captured = capsys.readouterr()
    text = f"exit {code}\n--- stdout\n{captured.out}--- stderr\n{captured.err}"
    path = GOLDEN / f"{_slug(command)}.txt"
    if os.environ.get("FLEET_TUI_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file for {command!r}: run with FLEET_TUI_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"output of `fleet-tui {command}` changed"
