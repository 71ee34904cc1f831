"""-M (models), -T (training sets, tasks) and -O (trainers) are bound by one binder: a factory states its
options once (`takes_options`), the host binds the user's strings to them, and every door types a value
and refuses an unknown name the same way. Trainers used to parse -O themselves and factories restated
their spec; `negharness train` called a trainer with raw strings, and the run's -T refusal had a shape
of its own (no did-you-mean)."""

from pathlib import Path

import pytest

from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.api import OptionSpec, takes_options
from negharness.api import TrainingSet, TrainOptions, TrainSetOptions
from negharness.testing import keyword_model, lookup

SPEC = {"threshold": OptionSpec(float, 0.1), "deep": OptionSpec(bool, False)}
OWNERS = {"-M": "model 'm'", "-T": "training set 't'", "-O": "trainer 'o'"}


def _host(seen: dict[str, dict]):
    """One factory of each kind declaring the same options; each records the values it receives."""
    @takes_options(SPEC)
    def a_model(options):
        seen["-M"] = dict(options.values)
        return keyword_model(ModelOptions())

    @takes_options(SPEC)
    def a_trainset(options):
        seen["-T"] = dict(options.values)
        return TrainingSet("t", [])

    @takes_options(SPEC)
    def a_trainer(options):
        seen["-O"] = dict(options.values)
        return Path("out")

    return lookup(model={"m": a_model}, trainset={"t": a_trainset}, trainer={"o": a_trainer}), a_model


def _through_the_host(host, flag: str, raw: dict[str, str]) -> None:
    """Each flag by the door a command uses: a run's model and a trainer's training set through the
    run's plugin lookup, a trainer as `negharness train` calls it (`Registry.create`)."""
    if flag == "-M":
        host.create("model", "m", ModelOptions(extra=raw))
    elif flag == "-T":
        host.create("trainset", "t", TrainSetOptions(Path("."), raw))
    else:
        host.registry.create("trainer", "o", TrainOptions(out=Path("."), extra=raw))


@pytest.mark.parametrize("spelling", ["YES", "1", "true", "On"])
def test_every_door_types_a_value_alike(spelling):
    seen: dict[str, dict] = {}
    host, _ = _host(seen)
    for flag in OWNERS:
        _through_the_host(host, flag, {"deep": spelling})
    assert seen == {flag: {"threshold": 0.1, "deep": True} for flag in OWNERS}


def test_every_door_refuses_an_unknown_name_and_a_bad_value_in_one_shape():
    host, _ = _host({})
    for flag, owner in OWNERS.items():
        with pytest.raises(UserError) as unknown:
            _through_the_host(host, flag, {"thresold": "0.3"})
        assert str(unknown.value) == (f"{flag} thresold: not an option of {owner}; did you mean threshold? "
                                      "(it takes: deep, threshold)")
        with pytest.raises(UserError) as bad:
            _through_the_host(host, flag, {"deep": "maybe"})
        assert str(bad.value).startswith(f"{flag} deep=maybe ({owner}): expected true or false")


def test_a_factory_called_directly_binds_its_options_the_same_way():
    seen: dict[str, dict] = {}
    _, a_model = _host(seen)
    a_model(ModelOptions(extra={"deep": "1", "threshold": "0.5"}))
    assert seen["-M"] == {"threshold": 0.5, "deep": True}
    with pytest.raises(UserError, match=r"^-M deeep: not an option of model 'a_model'; did you mean deep\?"):
        a_model(ModelOptions(extra={"deeep": "1"}))


def test_a_runs_task_option_is_refused_in_the_same_shape(cli):
    res = cli("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "-T", "n_itmes=5")
    assert res.returncode == 2
    assert "-T n_itmes: not an option of task 'shapes_t2i_original'; did you mean n_items? (it takes: " in res.stderr


def test_a_class_factory_stays_a_class_and_a_function_keeps_its_other_arguments():
    """`takes_options` on a class returns the class itself (isinstance and subclassing keep working; the
    host binds its options before calling it); on a function it passes any further arguments through."""
    from negharness.api import ModelOptions, OptionSpec, takes_options

    @takes_options({"k": OptionSpec(int, 1, "k")})
    class Made:
        def __init__(self, options: ModelOptions) -> None:
            self.options_ = options

    assert isinstance(Made(ModelOptions()), Made) and Made.options["k"].default == 1

    @takes_options({"k": OptionSpec(int, 1, "k")})
    def made(options: ModelOptions, extra: str = "") -> tuple[int, str]:
        return options.values["k"], extra

    assert made(ModelOptions(extra={"k": "3"}), extra="x") == (3, "x")
