"""negharness.api: the one public face of the host, for model, task, trainer and editor plugins.

Built-in and third-party plugins import this package (and its sub-modules) and nothing else of the
host; everything else is internal and may change between releases. The top level holds the
contracts (what a plugin implements: `Task`, `EmbeddingModel`, `ChoiceScorer`, `Editor`, `Detector`,
training sets), the run context a task receives (`EvalContext`, `EditContext`), options, errors and
registration. What a plugin uses beyond them lives in named facades: `negharness.api.scoring` (the
scorers and metrics a task calls), `.media`, `.files`, `.checkpoints`, `.published`, `.devices`,
`.options`, `.training`, `.queries`.

Names resolve on first use (PEP 562), so a plugin's registration module that imports `hookimpl`
and `Registrar` from here keeps `negharness list` free of torch; `_EXPORTS` is the top-level contract.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from negharness.api.exports import RENAMED, renamed, resolver
from negharness.version import HOOK_API, __version__

# public name -> the host module that defines it (the module itself where the name is a module)
_EXPORTS: dict[str, str] = {
    "hookimpl": "negharness.discovery.hookspecs",
    "Registrar": "negharness.discovery.registry",
    "register_yaml_folder": "negharness.declarative.register",
    "installed_plugins": "negharness.discovery.lookup",
    "UserError": "negharness.api.errors",
    "MediaError": "negharness.api.errors",
    "MissingDataError": "negharness.api.errors",
    "OptionSpec": "negharness.api.options",
    "takes_options": "negharness.api.options",
    "Task": "negharness.api.task",
    "TaskOptions": "negharness.api.task",
    "TaskResult": "negharness.api.task",
    "MetricInfo": "negharness.api.task",
    "EmbeddingModel": "negharness.api.model",
    "ChoiceScorer": "negharness.api.model",
    "ModelPlugin": "negharness.api.model",
    "ModelOptions": "negharness.api.model",
    "EvalContext": "negharness.api.context",
    "RunContext": "negharness.api.context",
    "PluginSource": "negharness.api.plugin_source",
    "EditContext": "negharness.engine.edit_context",
    "Editor": "negharness.api.editing",
    "Detector": "negharness.api.editing",
    "Detection": "negharness.api.editing",
    "TrainOptions": "negharness.api.training",
    "TrainSetOptions": "negharness.api.training",
    "TrainStream": "negharness.api.training",
    "TrainingSet": "negharness.api.training",
    "named_trainset": "negharness.api.training",
}

# names that were top-level before the facades (0.x): still resolved, from their facade, for plugins
# written against them; not in __all__, and the built-ins import them from the facade
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

# the facades: named sub-modules for what a plugin uses beyond the contracts
FACADES = ("media", "scoring", "files", "checkpoints", "published", "devices", "options", "training", "queries")
__all__ = sorted(["HOOK_API", "__version__", *_EXPORTS])

_resolve, _ = resolver(__name__, {**_EXPORTS, **_MOVED})


def __getattr__(name: str) -> Any:
    if name in RENAMED:
        return renamed(__name__, name)
    if name in _MOVED:  # through the facade, so both spellings are one object; not cached, so each use warns
        warnings.warn(f"negharness.api.{name} moved to {_MOVED[name]}: import it from there (the top-level "
                      f"name goes in a later release)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    return _resolve(name)


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what type checkers and IDEs read; the same names as _EXPORTS
    from negharness.api.context import EvalContext, RunContext
    from negharness.api.editing import Detection, Detector, Editor
    from negharness.api.errors import MediaError, MissingDataError, UserError
    from negharness.api.model import ChoiceScorer, EmbeddingModel, ModelOptions, ModelPlugin
    from negharness.api.options import OptionSpec, takes_options
    from negharness.api.plugin_source import PluginSource
    from negharness.api.task import MetricInfo, Task, TaskOptions, TaskResult
    from negharness.api.training import (
        TrainingSet,
        TrainOptions,
        TrainSetOptions,
        TrainStream,
        named_trainset,
    )
    from negharness.declarative.register import register_yaml_folder
    from negharness.discovery.hookspecs import hookimpl
    from negharness.discovery.lookup import installed_plugins
    from negharness.discovery.registry import Registrar
    from negharness.engine.edit_context import EditContext
