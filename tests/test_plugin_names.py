"""A registered name is the name (issue 51 item 4): a task whose class says another name is refused
naming both, and an entry whose module cannot be imported is blamed on that entry and its plugin,
not on the model of the run that needed it. Throwaway plugin packages are written in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

FNAMES = '''
from negharness.testing import ColourRetrievalTask


class F(ColourRetrievalTask):
    name = "f"
    family = "testing"


class FHard(F):
    """A harder variant that kept its parent's name."""

    def evaluate(self, ctx):
        result = super().evaluate(ctx)
        return type(result)({k: 0.0 for k in result.metrics}, result.counts)
'''


def _package(folder: Path, dist: str, entry_points: str, files: dict[str, str]) -> Path:
    """A throwaway installed distribution in ``folder``: its dist-info (``entry_points.txt``) and files."""
    info = folder / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_a_task_whose_class_says_another_name_is_refused_naming_both(tmp_path):
    """`f_hard` (class name still "f") used to run as `f`, its record overwriting f.json, exit 0."""
    plugin = _package(tmp_path / "plugin", "negharness-fnames",
                      "[negharness.models]\nfkw = negharness.testing:keyword_model\n\n"
                      "[negharness.tasks]\nf = negharness_fnames:F\nf_hard = negharness_fnames:FHard\n",
                      {"negharness_fnames.py": FNAMES})
    first = run_cli(["run", "--model", "fkw", "--task", "f"], tmp_path, [plugin])
    assert first.returncode == 0, first.stderr
    record = tmp_path / "results" / "fkw" / "f.json"
    assert json.loads(record.read_text())["metrics"]["R@1"] == 100.0
    hard = run_cli(["run", "--model", "fkw", "--task", "f_hard"], tmp_path, [plugin])
    assert hard.returncode == 2 and "Traceback" not in hard.stderr, hard.stderr
    assert "task 'f_hard'" in hard.stderr and "name = 'f'" in hard.stderr and "'negharness-fnames'" in hard.stderr
    assert json.loads(record.read_text())["metrics"]["R@1"] == 100.0 and hard.records == []


def test_an_entry_that_cannot_be_imported_is_blamed_on_itself_and_its_plugin(tmp_path):
    """A declared task with a SyntaxError used to read "model 'fkw' (plugin ...) failed: SyntaxError"; a
    declared model whose native library is absent (OSError at import) escaped as the machine's error."""
    plugin = _package(tmp_path / "plugin", "negharness-badentries",
                      "[negharness.models]\nfkw = negharness.testing:keyword_model\n"
                      "native_model = negharness_native:factory\n\n"
                      "[negharness.tasks]\nbad_syntax = negharness_badsyntax:Task\n",
                      {"negharness_badsyntax.py": "def broken(:\n    pass\n",
                       "negharness_native.py": "raise OSError('libnative.so: cannot open shared object file')\n"})
    task = run_cli(["run", "--model", "fkw", "--task", "bad_syntax"], tmp_path, [plugin])
    assert task.returncode == 2 and "Traceback" not in task.stderr, task.stderr
    assert "task 'bad_syntax' from plugin 'negharness-badentries'" in task.stderr and "SyntaxError" in task.stderr
    assert "negharness_badsyntax.py" in task.stderr and "model 'fkw'" not in task.stderr
    model = run_cli(["run", "--model", "native_model", "--task", "shapes_t2i_original"], tmp_path, [plugin])
    assert model.returncode == 2 and "Traceback" not in model.stderr, model.stderr
    assert "model 'native_model' from plugin 'negharness-badentries'" in model.stderr and "libnative" in model.stderr


FACTORY = '''
def make_task(options):
    raise ValueError("the task's factory fails on purpose")
'''


def test_a_task_factory_that_raises_is_blamed_on_the_task(tmp_path):
    """A factory function (no task object on the traceback yet) used to be read as the model's failure."""
    plugin = _package(tmp_path / "plugin", "negharness-factory",
                      "[negharness.models]\nfkw = negharness.testing:keyword_model\n\n"
                      "[negharness.tasks]\nfactory_task = negharness_factory:make_task\n",
                      {"negharness_factory.py": FACTORY})
    res = run_cli(["run", "--model", "fkw", "--task", "factory_task"], tmp_path, [plugin])
    assert res.returncode != 0 and "Traceback" not in res.stderr and "fails on purpose" in res.stderr
    assert "task 'factory_task' (plugin 'negharness-factory') failed (run with model 'fkw'" in res.stderr, res.stderr
