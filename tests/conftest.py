"""Shared fixtures: offline environment, a private cache, and CLI runners: `cli` in this process
(negharness.testing.run_cli), `cli_subprocess` through a fresh interpreter for the few tests whose
subject is the process itself (exit under signals, torchrun, imports at start-up, installed packages)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
THIRDPARTY = Path(__file__).parent / "thirdparty"
# the benchmarks' real files beside the checkout (CI has them; a newcomer's clone does not)
SHARED = Path(os.environ.get("NEGHARNESS_SHARED") or Path(__file__).resolve().parents[2] / "shared")
if (SHARED / "nltk_data").is_dir() and "NLTK_DATA" not in os.environ:
    os.environ["NLTK_DATA"] = str(SHARED / "nltk_data")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own embedding cache; the generated world (a pure function of its seed)
    is shared by the whole session through one data root, by all xdist workers of one run alike
    (each generated file is written atomically, so a worker reads a whole file or generates it)."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("NEGHARNESS_CACHE", str(cache))
    monkeypatch.setenv("NEGHARNESS_DATA", str(_session_root(tmp_path_factory) / "data-root"))
    return cache


def _session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's temporary folder: under xdist, the parent of the workers' own folders."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def run_cli_subprocess(args: list[str], cwd: Path, extra_paths: list[Path] = (), env: dict[str, str] | None = None,
                       timeout: float = 300) -> subprocess.CompletedProcess:
    """`negharness ARGS` in a fresh process, as a user would run it, with extra plugin folders on sys.path."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    paths = [str(p) for p in extra_paths] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else [])
    if paths:
        full_env["PYTHONPATH"] = os.pathsep.join(paths)
    full_env["COLUMNS"] = "200"
    return subprocess.run([sys.executable, "-m", "negharness.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def run_cli(args: list[str], cwd: Path, extra_paths: list[Path] = (), env: dict[str, str] | None = None):
    """`negharness ARGS` in this process (the same exit code, output and files as the subprocess,
    without a fresh interpreter and torch import per call), with extra plugin folders on sys.path."""
    from negharness.testing import (
        run_cli as run_in_process,  # lazy: conftest loads before any test needs torch
    )

    return run_in_process(args, cwd=cwd, env={**(env or {}), "COLUMNS": "200"}, paths=extra_paths)


@pytest.fixture
def cli(tmp_path: Path):
    """`negharness ...` in this process, in tmp_path; ``plugins`` names folders under tests/thirdparty."""
    def _run(*args: str, plugins: tuple[str, ...] = (), env: dict[str, str] | None = None):
        return run_cli(list(args), tmp_path, [THIRDPARTY / p for p in plugins], env)
    return _run


@pytest.fixture
def cli_subprocess(tmp_path: Path):
    """As `cli`, through the console entry in a fresh interpreter: for tests of the process itself."""
    def _run(*args: str, plugins: tuple[str, ...] = (), env: dict[str, str] | None = None, timeout: float = 300):
        return run_cli_subprocess(list(args), tmp_path, [THIRDPARTY / p for p in plugins], env, timeout)
    return _run


def _nltk_data_present() -> bool:
    """The tokenizer and tagger data the real-caption builders need (the embedded world ships its queries)."""
    try:
        import nltk

        from negharness.text.nltk_resources import RESOURCES

        for path in RESOURCES.values():
            nltk.data.find(path)
        return True
    except (ImportError, LookupError):
        return False


NLTK_REASON = ("NLTK tokenizer/tagger data absent: set NLTK_DATA to a folder with punkt_tab and "
               "averaged_perceptron_tagger_eng (CI points it at ../shared/nltk_data)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*what): outside data the test reads: 'nltk' (NLTK's tokenizer and "
                            "tagger data) or a path under ../shared; the test is skipped, with the reason, without it")


def _missing(what: str) -> str | None:
    """Why an outside resource is absent (None when present)."""
    if what == "nltk":
        return None if _nltk_data_present() else NLTK_REASON
    path = SHARED / what
    return None if path.exists() else (f"needs ../shared/{what} (the benchmarks' real files, beside the checkout "
                                       f"in CI; set NEGHARNESS_SHARED to use another folder)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The one rule for outside data: a test marked `needs(...)` skips, naming what is missing. And
    tests marked `heavy` (tens of seconds each) go first, in their order: xdist hands out tests in
    collection order, so a heavy test collected last would run alone while the other worker idles."""
    items[:] = sorted(items, key=lambda item: item.get_closest_marker("heavy") is None)
    cache: dict[str, str | None] = {}
    for item in items:
        for mark in item.iter_markers("needs"):
            reasons = [cache.setdefault(w, _missing(w)) for w in mark.args]
            reason = next((r for r in reasons if r), None)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
                break
