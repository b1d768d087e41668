"""One parser for the CLI and the builder: fields by argparse dest, FieldErrors naming them."""

from __future__ import annotations

import argparse

import pytest

from fleet_tui.core.catalog import load_catalog
from fleet_tui.core.choices import KINDS, OPTIMIZERS, PRECISIONS, SHARDINGS
from fleet_tui.core.errors import FieldError
from fleet_tui.core.workload import Workload, parse_count, parse_params, parse_run_tokens, parse_workload


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_params_bounds_are_one_set():
    assert parse_params("7B") == 7_000_000_000 == parse_params("7e9") == parse_params("7_000_000_000")
    assert parse_params("405M") == 405_000_000 and parse_params("1.5T") == 1_500_000_000_000
    for bad in ("lots", "50M", "0", "-7B", "200T"):
        with pytest.raises(FieldError) as exc:
            parse_params(bad)
        assert exc.value.field == "params" and exc.value.fields == ("params",)


def test_run_tokens_take_a_fine_tune_and_refuse_typos():
    # a fine-tune is millions of tokens: --tokens 50M was refused as "between 100M and 100T parameters"
    assert parse_run_tokens("50M") == 50_000_000 == parse_run_tokens("5e7") == parse_run_tokens("50_000_000")
    assert parse_run_tokens("15T") == 15 * 10**12 and parse_run_tokens("1") == 1
    for bad, why in (("lots", "not a token count"), ("0", "between 1 and 1,000T tokens"),
                     ("2e15", "between 1 and 1,000T tokens"), ("-5M", "not a token count"),
                     ("inf", "not a token count"), ("nan", "not a token count")):
        with pytest.raises(FieldError) as exc:
            parse_run_tokens(bad, "training_tokens")
        text = exc.value.render(lambda f: "--" + f.replace("_", "-"))
        assert text.startswith(f"--training-tokens {bad!r}: ") and why in text and "parameters" not in text


def test_count_names_its_field_and_range():
    assert parse_count("1e3", "batch") == 1000 and parse_count("1,024", "seq_len") == 1024
    assert parse_count("", "batch") is None and parse_count(None, "batch") is None
    with pytest.raises(FieldError) as exc:
        parse_count("0", "gpus", 1, 8)
    assert exc.value.render(lambda f: "--" + f) == "--gpus 0: out of range (allowed: 1 to 8)"
    with pytest.raises(FieldError) as exc:
        parse_count("{x}", "batch")  # a user's braces are text, not fields
    assert exc.value.fields == ("batch",) and "'{x}'" in str(exc.value)


def test_dict_namespace_and_dataclass_give_the_same_workload(catalog):
    import dataclasses

    fields = dict(model="llama-3.1-8b", workload="lora", batch="4", seq_len="2048", gpus="2")
    by_dict = parse_workload(fields, catalog)
    assert parse_workload(argparse.Namespace(**fields), catalog) == by_dict
    Form = dataclasses.make_dataclass("Form", list(fields))
    assert parse_workload(Form(**fields), catalog) == by_dict
    assert by_dict.sharding == "data" and by_dict.master_weights == "none" and by_dict.gpus == 2


def test_conflicts_name_every_field_involved(catalog):
    cases = [
        (dict(params="7B", gen_len="10"), "gen_len", ("gen_len", "prompt_len")),
        (dict(params="7B", prompt_len="10"), "prompt_len", ("prompt_len", "gen_len", "seq_len")),
        (dict(params="7B", workload="inference", optimizer="sgd"), "optimizer", ("optimizer", "workload")),
        (dict(params="7B", workload="training", precision="int4"), "precision", ("precision", "workload")),
        (dict(model="llama-3.1-8b", gpus="3", sharding="tensor"), "gpus", ("gpus", "sharding")),
        (dict(), "model", ("model", "model_config", "params")),
        (dict(params="7B", workload="nope"), "workload", ("workload",)),
    ]
    for fields, field, named in cases:
        with pytest.raises(FieldError) as exc:
            parse_workload(fields, catalog)
        assert exc.value.field == field and set(exc.value.fields) == set(named), fields


def test_option_lists_are_the_workload_types():
    from typing import get_args

    import fleet_tui.core.workload as workload_module

    # a record's annotations are the names of module-level Literal aliases (core/records.py)
    for field, options in (("kind", KINDS), ("precision", PRECISIONS), ("optimizer", OPTIMIZERS),
                           ("sharding", SHARDINGS)):
        alias = getattr(workload_module, Workload.model_fields[field].type)
        assert get_args(alias) == options


def test_unsloth_preset_takes_8bit_adamw_unless_told(catalog):
    base = {"model": "llama-3.1-8b", "workload": "qlora", "seq_len": 2048, "framework": "unsloth"}
    assert parse_workload(base, catalog).optimizer == "adamw8bit"  # optim="adamw_8bit" in its README
    assert parse_workload({**base, "optimizer": "adamw"}, catalog).optimizer == "adamw"
    assert parse_workload({**base, "framework": "hf"}, catalog).optimizer == "adamw"


def test_engine_knobs_travel_as_one_engine_config(catalog):
    from fleet_tui.core.workload import ENGINE_FIELDS, EngineConfig

    w = parse_workload({"model": "mixtral-8x7b", "prompt_len": 512, "gen_len": 64, "gpus": 2, "engine": "sglang",
                        "kv_cache_dtype": "fp8", "gpu_memory_utilization": "0.8", "max_num_batched_tokens": 4096,
                        "max_num_seqs": 64, "expert_parallel": True}, catalog)
    assert w.engine_config == EngineConfig(engine="sglang", kv_cache_dtype="fp8", gpu_memory_utilization=0.8,
                                           max_num_batched_tokens=4096, max_num_seqs=64, expert_parallel=True)
    # the workload keeps each knob as a field of its own, equal to the config's
    assert all(getattr(w, f) == getattr(w.engine_config, f) for f in ENGINE_FIELDS)
    defaults = parse_workload({"model": "llama-3.1-8b", "prompt_len": 512, "gen_len": 64}, catalog).engine_config
    assert defaults.engine == "vllm" and defaults.max_num_seqs is None and defaults.gpu_memory_utilization is None


def test_every_engine_knob_is_refused_for_training(catalog):
    from fleet_tui.core.workload import ENGINE_FIELDS

    values = {"engine": "vllm", "kv_cache_dtype": "fp8", "gpu_memory_utilization": 0.8,
              "max_num_batched_tokens": 4096, "max_num_seqs": 8, "expert_parallel": True, "api_server_count": 2}
    assert set(values) == set(ENGINE_FIELDS)
    for field, value in values.items():
        with pytest.raises(FieldError) as exc:
            parse_workload({"model": "llama-3.1-8b", "workload": "training", "seq_len": 1024, field: value}, catalog)
        assert exc.value.field == field
