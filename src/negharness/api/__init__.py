"""negharness.api: the one public face of the host, for model, task, trainer and editor plugins.

Built-in and third-party plugins import this package (and its sub-modules) and nothing else of the
host; everything else is internal and may change between releases. The top level holds the
contracts (what a plugin implements: `Task`, `EmbeddingModel`, `ChoiceScorer`, `Editor`, `Detector`,
training sets), the run context a task receives (`EvalContext`, `EditContext`), options, errors and
registration. What a plugin uses beyond them lives in named facades: `negharness.api.scoring` (the
scorers and metrics a task calls), `.media`, `.files`, `.checkpoints`, `.published`, `.devices`,
`.options`, `.training`, `.queries`.

The face sits on top of the house (as `pytest` over `_pytest`): the contracts live in the ground
floor, `negharness.contracts`, which every host room imports; no host room imports this package.
Its imports are plain, so type checkers see every name; importing it loads no torch, so a plugin's
registration module that imports `hookimpl` and `Registrar` keeps `negharness list` quick.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from negharness.api.exports import RENAMED as _RENAMED, renamed as _renamed
from negharness.contracts.context import EvalContext as EvalContext, RunContext as RunContext
from negharness.contracts.editing import Detection as Detection, Detector as Detector, Editor as Editor
from negharness.contracts.errors import (
    MediaError as MediaError,
    MissingDataError as MissingDataError,
    UserError as UserError,
)
from negharness.contracts.model import (
    ChoiceScorer as ChoiceScorer,
    EmbeddingModel as EmbeddingModel,
    ModelOptions as ModelOptions,
    ModelPlugin as ModelPlugin,
)
from negharness.contracts.options import OptionSpec as OptionSpec, takes_options as takes_options
from negharness.contracts.plugin_source import PluginSource as PluginSource
from negharness.contracts.task import (
    MetricInfo as MetricInfo,
    Task as Task,
    TaskOptions as TaskOptions,
    TaskResult as TaskResult,
)
from negharness.contracts.training import (
    TrainingSet as TrainingSet,
    TrainOptions as TrainOptions,
    TrainSetOptions as TrainSetOptions,
    TrainStream as TrainStream,
    named_trainset as named_trainset,
)
from negharness.discovery.hookspecs import hookimpl as hookimpl
from negharness.discovery.registry import Registrar as Registrar
from negharness.engine.edit_context import EditContext as EditContext
from negharness.version import HOOK_API as HOOK_API, __version__ as __version__

__all__ = [
    "ChoiceScorer", "Detection", "Detector", "EditContext", "Editor", "EmbeddingModel", "EvalContext",
    "HOOK_API", "MediaError", "MetricInfo", "MissingDataError", "ModelOptions", "ModelPlugin",
    "OptionSpec", "PluginSource", "Registrar", "RunContext", "Task", "TaskOptions", "TaskResult",
    "TrainOptions", "TrainSetOptions", "TrainStream", "TrainingSet", "UserError", "__version__",
    "hookimpl", "installed_plugins", "named_trainset", "register_yaml_folder", "takes_options",
]



# Two entry points are thin functions here, not re-exports: what they run imports YAML, numpy and the
# download code (~0.7 s), which a plugin's registration module, importing this face, must not pay.
def register_yaml_folder(registry: Any, folder: Path | Any, generators: dict[str, Any] | None = None) -> list[str]:
    """Register every YAML task in ``folder`` (a path or an ``importlib.resources`` traversable of a
    plugin package) on a hook's registrar; returns the names. Call from ``negharness_register_tasks``."""
    from negharness.declarative import register  # lazy: YAML and the task kinds load when tasks register

    return register.register_yaml_folder(registry, folder, generators)


def installed_plugins(device: Any = None) -> PluginSource:
    """The installed plugins as a lookup: what a library caller passes as ``ModelOptions(plugins=...)``
    (typed as the contract a plugin relies on, `PluginSource`; the object is the host's lookup)."""
    from negharness.discovery import lookup  # lazy: plugin discovery loads entry points and the fetchers

    return lookup.installed_plugins(device)


# the facades: named sub-modules for what a plugin uses beyond the contracts
FACADES = ("media", "scoring", "files", "checkpoints", "published", "devices", "options", "training", "queries")

# names that were top-level before the facades (0.x): still resolved, from their facade, for plugins
# written against them, with a DeprecationWarning at each use; not in __all__, and the built-ins
# import them from the facade. Type checkers do not see them (the module `__getattr__` below is
# hidden from them): `typing_extensions.deprecated` cannot mark constants, so an error there names
# the missing name rather than typing it as Any.
_MOVED: dict[str, str] = {
    "QueryBuild": "negharness.api.queries",
    "QueryBuildOptions": "negharness.api.queries",
    "ChoiceSet": "negharness.api.scoring",
    "DATA_ENCODING": "negharness.api.files",
    "Dist": "negharness.api.devices",
    "FrameSampling": "negharness.api.media",
    "MAX_CAPTION_CHARS": "negharness.api.files",
    "MCQ_METRICS": "negharness.api.scoring",
    "MediaSet": "negharness.api.media",
    "NEGATED_METRICS": "negharness.api.scoring",
    "PRECISIONS": "negharness.api.devices",
    "PRECISION_NAMES": "negharness.api.devices",
    "QRELS_OPTION": "negharness.api.scoring",
    "QuerySet": "negharness.api.scoring",
    "RETRIEVAL_NEG_METRICS": "negharness.api.scoring",
    "Relevance": "negharness.api.scoring",
    "RootGuard": "negharness.api.files",
    "TEXT_TO_MEDIA_METRICS": "negharness.api.scoring",
    "array_to_tensor": "negharness.api.media",
    "atomic_write": "negharness.api.files",
    "atomic_write_bytes": "negharness.api.files",
    "atomic_write_json": "negharness.api.files",
    "atomic_write_text": "negharness.api.files",
    "autocast": "negharness.api.devices",
    "base_note": "negharness.api.checkpoints",
    "best_relevant_rank": "negharness.api.scoring",
    "cache_root": "negharness.api.files",
    "cached_json": "negharness.api.files",
    "check_batch_size": "negharness.api.options",
    "cell_captions": "negharness.api.files",
    "check_caption": "negharness.api.files",
    "check_csv_header": "negharness.api.files",
    "check_csv_width": "negharness.api.files",
    "collection_digest": "negharness.api.published",
    "cpu_autocast_warning": "negharness.api.devices",
    "data_root": "negharness.api.files",
    "decode_video": "negharness.api.media",
    "distributed": "negharness.api.devices",
    "drop_unreadable": "negharness.api.scoring",
    "evaluate_mcq": "negharness.api.scoring",
    "evaluate_negated": "negharness.api.scoring",
    "evaluate_text_to_media": "negharness.api.scoring",
    "fit_state_dict": "negharness.api.checkpoints",
    "frame_folders": "negharness.api.media",
    "gather_batch": "negharness.api.devices",
    "hash_array": "negharness.api.files",
    "hash_json": "negharness.api.files",
    "hash_state_dict": "negharness.api.checkpoints",
    "image_files": "negharness.api.media",
    "jpeg_draft": "negharness.api.media",
    "literal_captions": "negharness.api.files",
    "load_frames": "negharness.api.media",
    "load_or_explain": "negharness.api.checkpoints",
    "load_state_dict": "negharness.api.checkpoints",
    "lower_priority": "negharness.api.devices",
    "numbered_rows": "negharness.api.files",
    "pad_scores": "negharness.api.scoring",
    "pair_scores": "negharness.api.scoring",
    "parse_bool": "negharness.api.options",
    "parse_options": "negharness.api.options",
    "per_query": "negharness.api.scoring",
    "published_notes": "negharness.api.published",
    "query_scores": "negharness.api.scoring",
    "read_checkpoint": "negharness.api.checkpoints",
    "read_rgb": "negharness.api.media",
    "require_8bit": "negharness.api.media",
    "require_regular": "negharness.api.files",
    "resolve_device": "negharness.api.devices",
    "resolve_precision": "negharness.api.devices",
    "retrieval_metrics": "negharness.api.scoring",
    "save_safetensors": "negharness.api.checkpoints",
    "score_choices": "negharness.api.scoring",
    "similarities": "negharness.api.scoring",
    "tables_beside": "negharness.api.published",
    "task_qrels": "negharness.api.scoring",
    "video_files": "negharness.api.media",
}


if not TYPE_CHECKING:
    def __getattr__(name: str) -> Any:
        """A moved or renamed 0.x name, through its facade (so both spellings are one object); not
        cached, so each use warns."""
        import importlib
        import warnings

        if name in _RENAMED:
            return _renamed(__name__, name)
        if name not in _MOVED:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        warnings.warn(f"negharness.api.{name} moved to {_MOVED[name]}: import it from there (the top-level "
                      f"name goes in a later release)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)


def __dir__() -> list[str]:
    return __all__
