"""The run settings have one spelling, one type and one help in every command that loads a model."""

import argparse

import pytest

from negharness.cli.parser import RUN_SETTINGS, build_parser


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_spells_a_run_setting_the_same_way():
    seen = 0
    for name, sub in _subparsers().items():
        for action in sub._actions:
            for setting, (flags, spec) in RUN_SETTINGS.items():
                if set(action.option_strings) & set(flags):
                    seen += 1
                    assert tuple(action.option_strings) == flags, (name, setting)
                    assert action.type == spec.get("type"), (name, setting)
                    assert action.dest == setting, (name, setting)
    assert seen >= 1 + 3 * 7  # diagnose: --device; run, fire, train: all seven (compare, build-queries: --seed)


@pytest.mark.parametrize("command", ["run", "fire", "train"])
def test_fire_and_train_take_what_run_takes(command):
    """fire used to take --device but not --precision/--batch-size/--workers: the run it makes could
    not be set as `run` sets it."""
    options = {o for a in _subparsers()[command]._actions for o in a.option_strings}
    assert {"--device", "--precision", "--batch-size", "--workers", "--seed", "--data-root", "--cache-dir"} <= options


def test_every_list_of_precisions_reads_the_one_table():
    """fc4bba0 kept one table (api/precision) and five hand-written lists of it; now every list is
    `PRECISION_NAMES` (a trainer's also "auto"), and each name resolves to a dtype."""
    from negharness.api import PRECISION_NAMES, resolve_precision
    from negharness.plugins import options as declared
    from negharness.plugins.negation_training import CHOICES

    lists = {name: next(a.choices for a in sub._actions if "--precision" in a.option_strings)
             for name, sub in _subparsers().items() if any("--precision" in a.option_strings for a in sub._actions)}
    assert set(lists) == {"run", "fire", "train"}
    assert lists["run"] == lists["fire"] == list(PRECISION_NAMES)
    assert list(lists["train"]) == list(CHOICES["precision"]) == ["auto", *PRECISION_NAMES]
    assert declared.HF_VLM.options["dtype"].choices == declared.INSTRUCT_PIX2PIX.options["precision"].choices \
        == PRECISION_NAMES
    assert [str(resolve_precision(p)) for p in PRECISION_NAMES] == ["torch.float32", "torch.float16", "torch.bfloat16"]
