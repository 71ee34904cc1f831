"""A model's ``-M`` options are checked before torch loads (issue 53 item 5): a registration names its
options' declaration in a module without torch (``registry.add(..., options="module:attribute")``), the
run checks keys and values there first (`negharness.discovery.lookup.check_options`, called by
`negharness.engine.precheck.check_request`), and the factory is decorated with the same object, so the
two cannot differ (`negharness.discovery.registry.Entry.load` refuses a pair that does).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from negharness.api import ModelOptions, OptionSpec, PluginLoadError, UserError, takes_options
from negharness.contracts.options import declared_options
from negharness.discovery.lookup import check_options
from negharness.discovery.registry import Entry, Registry

DECLARING_KINDS = ("model", "editor", "detector", "judge", "trainer")  # options -M, -J (judges), -O (trainers)

TYPOS = {  # case -> (run's arguments, what the one error line says)
    "a key": (["--model", "shapes_clip", "-M", "quickgelu=1"],
              "-M quickgelu: not an option of model 'shapes_clip'; did you mean quick_gelu?"),
    "a value": (["--model", "shapes_clip", "-M", "text_lengths=sometimes"],
                "-M text_lengths=sometimes (model 'shapes_clip'): choose one of auto, on, off"),
    "before a missing checkpoint": (["--model", "clip", "--checkpoint", "gone.pt", "-M", "quickgelu=1"],
                                    "-M quickgelu: not an option of model 'clip'"),
    "a wrapper's base's key": (["--model", "boolean", "-M", "base=shapes_clip", "-M", "quickgelu=1"],
                               "-M quickgelu: not an option of model 'boolean' or its base 'shapes_clip'; "
                               "did you mean quick_gelu?"),
    "a wrapper's own key": (["--model", "steer", "-M", "base=shapes_clip", "-M", "alpah=0.2"],
                            "did you mean alpha?"),
    "a wrapper's own value": (["--model", "steer", "-M", "base=shapes_clip", "-M", "alpha=strong"],
                              "-M alpha=strong (model 'steer'): expected float"),
    "a fine-tune's base, named by its checkpoint": (
        ["--model", "clip_bnl", "--checkpoint", "trained", "-M", "quickgelu=1"],
        "-M quickgelu: not an option of model 'clip_bnl' or its base 'shapes_clip'"),
    "a shared key no model takes": (["-M", "quickgelu=1", "--model", "shapes_clip", "--model", "clip"],
                                    "-M quickgelu (given before the first --model): none of the models"),
}


@pytest.mark.parametrize("name", list(TYPOS))
def test_an_option_typo_is_refused_before_torch_loads(name, tmp_path):
    """One line, exit 2, no torch in the process's import listing: the typo used to be found by the
    factory's binder, after its module had imported torch (7-14 s)."""
    from test_cli_imports import console_script

    (tmp_path / "trained").mkdir()  # what `negharness train --out` writes, as far as the base goes
    (tmp_path / "trained" / "model.json").write_text(json.dumps({"format": "negharness-trained-v1",
                                                                 "base_model": "shapes_clip"}))
    args, needle = TYPOS[name]
    _refused_before_torch(console_script(["run", *args, "--task", "shapes_t2i_original"], tmp_path), needle, name)


def _refused_before_torch(done, needle: str, name: str) -> None:
    """One line, exit 2, saying ``needle``, with no torch in the process's import listing."""
    from test_cli_imports import TORCH_LINE, said

    lines = said(done.stderr)
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert needle in lines[0], lines[0]
    assert not TORCH_LINE.search(done.stderr), f"{name}: torch was imported before the typo was told"


TRAIN_TYPOS = {  # case -> (train's arguments, what the one error line says)
    "a trainer's key": (["--trainer", "bnl", "-O", "lamda_v=1"], "-O lamda_v: not an option of trainer 'bnl'; "
                                                                   "did you mean lambda_v?"),
    "a trainer's value": (["--trainer", "negbench", "-O", "alpha=most"], "-O alpha=most (trainer 'negbench'): "
                                                                         "expected float"),
    "a flag given as -O": (["--trainer", "bnl", "-O", "seed=3"], "-O seed: give --seed"),
    "the model's key": (["--trainer", "bnl", "--model", "shapes_clip", "-M", "quickgelu=1"],
                        "-M quickgelu: not an option of model 'shapes_clip'"),
    "the training set's key": (["--trainer", "bnl", "--task", "shapes", "-T", "n_trian=5"],
                               "-T n_trian: not an option of training set 'shapes'; did you mean n_train?"),
    "the default training set's key": (["--trainer", "bnl", "-T", "n_trian=5"],  # no --task: `TrainOptions.trainset`
                                       "-T n_trian: not an option of training set 'shapes'; did you mean n_train?"),
    "-T for a trainer that reads none": (["--trainer", "shapes_pretrain", "-T", "n_train=5"],  # was ignored
                                         "-T n_train: trainer 'shapes_pretrain' reads no training set"),
}


@pytest.mark.parametrize("name", list(TRAIN_TYPOS))
def test_a_train_option_typo_is_refused_before_torch_loads(name, tmp_path):
    """`negharness train` bound -O, -M and -T in the factories, after the trainer's module imported torch."""
    from test_cli_imports import console_script

    args, needle = TRAIN_TYPOS[name]
    _refused_before_torch(console_script(["train", *args, "--out", "out"], tmp_path), needle, name)
    assert not (tmp_path / "out").exists()


def test_the_library_door_refuses_the_typo_before_torch(tmp_path):
    code = ("import sys, negharness\n"
            "try:\n"
            "    negharness.run('shapes_clip', 'shapes_t2i_original', model_args={'quickgelu': '1'},\n"
            f"                   output_dir={str(tmp_path / 'out')!r})\n"
            "except negharness.api.UserError as exc:\n"
            "    print(exc)\n"
            "print('torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["-M quickgelu: not an option of model 'shapes_clip'; did you mean "
                                        "quick_gelu? (it takes: decode, frames, jpeg_draft, quick_gelu, "
                                        "text_lengths)", "False"], done.stderr[-2000:]


def test_every_builtin_declares_its_options_without_torch():
    """Each built-in model, editor, detector and judge names its declaration (``options=``), and reading
    every one of them imports no torch."""
    code = ("import sys\n"
            "from negharness.discovery.manager import make_host\n"
            "registry = make_host().registry\n"
            f"for kind in {DECLARING_KINDS!r}:\n"
            "    for entry in registry.entries(kind):\n"
            "        if entry.plugin.startswith('builtin'):\n"
            "            assert entry.declared(load=False) is not None, (kind, entry.name)\n"
            "print('torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]


def test_every_builtin_factory_takes_exactly_its_registered_declaration():
    """One truth: what the run checks before torch is what the factory binds after (for a wrapper, the
    option naming its base, or the function reading it from the checkpoint, too)."""
    from negharness.discovery.manager import make_host

    registry = make_host().registry
    checked = []
    for kind in DECLARING_KINDS:
        for entry in registry.entries(kind):
            if not entry.plugin.startswith("builtin"):
                continue
            declared, factory = entry.declared(load=False), entry.load()
            assert dict(declared.options) == declared_options(factory), entry.name
            assert (declared.passes_rest, declared.wraps) == (factory.passes_rest, factory.wraps), entry.name
            checked.append(entry.name)
    assert {"clip", "boolean", "steer", "clip_bnl", "instruct_pix2pix", "owlv2", "hf_vlm_judge", "bnl",
            "shapes_pretrain"} <= set(checked)


def _entry(factory, options, target=None):
    return Entry("model", "mine", target or factory, "", "thirdparty", {"options": options})


def test_a_registration_and_a_factory_that_differ_are_refused():
    @takes_options({"alpha": OptionSpec(float, 0.5)})
    def mine(options):
        return options

    for options, drift in (({"alpha": OptionSpec(float, 0.1)}, "option 'alpha' is declared differently"),
                           ({"beta": OptionSpec(float, 0.5)}, "option 'alpha' is declared by only one"),
                           (takes_options({"alpha": OptionSpec(float, 0.5)}, wraps="base"), "their passes_rest")):
        with pytest.raises(PluginLoadError, match=f"model 'mine' from plugin 'thirdparty'.*options=.*{drift}"):
            _entry(mine, options).load()
    assert _entry(mine, {"alpha": OptionSpec(float, 0.5)}).load() is mine  # equal declarations are one
    with pytest.raises(PluginLoadError, match="its factory declares no options"):
        _entry(lambda options: options, {"alpha": OptionSpec(float, 0.5)}).load()


def test_a_third_partys_declaration_is_checked_without_importing_its_module():
    """The target's module does not even exist: the check reads only the declaration options= names,
    given as a "module:attribute" string or as the object."""
    registry = Registry()
    for options in ("negharness.plugins.options:OPEN_CLIP", {"quick_gelu": OptionSpec(bool)}):
        entry = registry.add("model", f"mine{len(registry.names('model'))}", "no_such_module_anywhere:factory", "",
                             "thirdparty", options=options)
        with pytest.raises(UserError, match="-M quickgelu: not an option of model 'mine.'; did you mean quick_gelu"):
            check_options(entry, ModelOptions(extra={"quickgelu": "1"}), registry)
        check_options(entry, ModelOptions(extra={"quick_gelu": "yes"}), registry)  # a right one passes
    bad = registry.add("model", "bad", "no_such_module_anywhere:factory", "", "thirdparty",
                       options="negharness.plugins.options:checkpoint_base")
    with pytest.raises(UserError, match=r"model 'bad' from plugin 'thirdparty': options=negharness.plugins.options:"
                                        r"checkpoint_base: must name a takes_options\(...\) or a dict of OptionSpec, "
                                        r"not function"):
        check_options(bad, ModelOptions(extra={"x": "1"}), registry)
    gone = registry.add("model", "gone", "no_such_module_anywhere:factory", "", "thirdparty",
                        options="no_such_module_anywhere:OPTIONS")
    with pytest.raises(PluginLoadError, match="model 'gone' from plugin 'thirdparty': cannot load"):
        check_options(gone, ModelOptions(extra={"x": "1"}), registry)
