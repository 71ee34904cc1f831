"""negharness.api: the one public face of the host, for model, task, trainer and editor plugins.

Built-in and third-party plugins import this package and nothing else of the host; everything else
is internal and may change between releases. This module is the face, written out name by name (as
`pytest/__init__.py` lists what it takes from `_pytest`): the contracts (what a plugin implements:
`Task`, `EmbeddingModel`, `ChoiceScorer`, `Editor`, `Detector`, training sets, query builders), the
run context a task receives (`EvalContext`, `EditContext`), options, errors, names, hashes,
precision and registration. What a plugin uses beyond them, whose modules import torch, lives in
named facades with a literal table of where each name lives: `negharness.api.scoring` (the scorers
and metrics a task calls), `.media`, `.files`, `.checkpoints`, `.published`, `.devices`.

The face sits on top of the house: the contracts live in the ground floor, `negharness.contracts`,
which every host room imports; no host room imports this package. Its imports are plain, so type
checkers see every name; importing it loads no torch (``PRECISIONS``, whose table holds torch dtypes,
is built when first asked), so a plugin's registration module that imports `hookimpl` and
`Registrar` keeps `negharness list` quick.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from negharness.api.exports import RENAMED as _RENAMED, renamed as _renamed
from negharness.contracts.context import Counters as Counters, EvalContext as EvalContext, RunContext as RunContext
from negharness.contracts.editing import Detection as Detection, Detector as Detector, Editor as Editor
from negharness.contracts.errors import (
    DuplicateNameError as DuplicateNameError,
    MediaError as MediaError,
    MissingDataError as MissingDataError,
    PluginLoadError as PluginLoadError,
    UnknownNameError as UnknownNameError,
    UserError as UserError,
)
from negharness.contracts.hashing import hash_json as hash_json
from negharness.contracts.model import (
    array_to_tensor as array_to_tensor,
    as_encoder as as_encoder,
    ChoiceScorer as ChoiceScorer,
    EmbeddingModel as EmbeddingModel,
    hash_state_dict as hash_state_dict,
    held_modules as held_modules,
    jpeg_draft as jpeg_draft,
    ModelOptions as ModelOptions,
    ModelPlugin as ModelPlugin,
)
from negharness.contracts.model_options import ModelOptions as ModelOptions
from negharness.contracts.names import (
    lookalikes as lookalikes,
    NAME as NAME,
    name_problem as name_problem,
    RULE as RULE,
)
from negharness.contracts.options import (
    bind_declared as bind_declared,
    BindsOptions as BindsOptions,
    canonical_text as canonical_text,
    check_batch_size as check_batch_size,
    check_env_flags as check_env_flags,
    declared_options as declared_options,
    describe_options as describe_options,
    env_flag as env_flag,
    ENV_FLAGS as ENV_FLAGS,
    FALSE as FALSE,
    frozen_empty as frozen_empty,
    OptionSpec as OptionSpec,
    parse_bool as parse_bool,
    parse_options as parse_options,
    refuse_unknown as refuse_unknown,
    split_options as split_options,
    takes_options as takes_options,
    TRUE as TRUE,
)
from negharness.contracts.plugin_source import PluginSource as PluginSource, require_plugins as require_plugins
from negharness.contracts.precision import (
    autocast as autocast,
    cpu_autocast_warning as cpu_autocast_warning,
    PRECISION_NAMES as PRECISION_NAMES,
    resolve_precision as resolve_precision,
)
from negharness.contracts.queries import QueryBuild as QueryBuild, QueryBuildOptions as QueryBuildOptions
from negharness.contracts.sampling import FrameSampling as FrameSampling, sampling_problem as sampling_problem
from negharness.contracts.task import (
    check_result as check_result,
    cluster_problems as cluster_problems,
    DEFAULT_CLUSTER as DEFAULT_CLUSTER,
    MetricInfo as MetricInfo,
    MODALITIES as MODALITIES,
    Task as Task,
    TaskDefinitionError as TaskDefinitionError,
    TaskMeta as TaskMeta,
    TaskOptions as TaskOptions,
    TaskResult as TaskResult,
)
from negharness.contracts.training import (
    Mcq as Mcq,
    named_trainset as named_trainset,
    TrainingSet as TrainingSet,
    TrainOptions as TrainOptions,
    TrainSetOptions as TrainSetOptions,
    TrainStream as TrainStream,
)
from negharness.discovery.hookspecs import hookimpl as hookimpl
from negharness.discovery.registry import Registrar as Registrar
from negharness.engine.edit_context import EditContext as EditContext
from negharness.version import __version__ as __version__, HOOK_API as HOOK_API, installed_version as installed_version

__all__ = [
    "__version__", "array_to_tensor", "as_encoder", "autocast", "bind_declared", "BindsOptions", "canonical_text",
    "check_batch_size", "check_env_flags", "check_result", "ChoiceScorer", "ChoiceSet", "cluster_problems",
    "Counters", "cpu_autocast_warning", "declared_options", "DEFAULT_CLUSTER", "describe_options", "Detection",
    "Detector", "DuplicateNameError", "EditContext", "Editor", "EmbeddingModel", "env_flag", "ENV_FLAGS",
    "EvalContext", "FALSE", "FrameSampling", "frozen_empty", "hash_json", "hash_state_dict", "held_modules",
    "HOOK_API", "hookimpl", "installed_plugins", "installed_version", "jpeg_draft", "lookalikes", "Mcq", "MediaError", "MetricInfo",
    "MissingDataError", "MODALITIES", "ModelOptions", "ModelPlugin", "NAME", "name_problem", "named_trainset",
    "OptionSpec", "pad_scores", "parse_bool", "parse_options", "PluginLoadError", "PluginSource", "PRECISION_NAMES",
    "PRECISIONS", "QueryBuild", "QueryBuildOptions", "refuse_unknown", "register_yaml_folder", "Registrar",
    "require_plugins", "resolve_precision", "RULE", "RunContext", "sampling_problem", "split_options",
    "takes_options", "Task", "TaskDefinitionError", "TaskMeta", "TaskOptions", "TaskResult", "TrainingSet",
    "TrainOptions", "TrainSetOptions", "TrainStream", "TRUE", "UnknownNameError", "UserError",
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


# the facades: named sub-modules for what a plugin uses beyond the face, whose homes import torch
FACADES = ("media", "scoring", "files", "checkpoints", "published", "devices")

# names that were top-level before the facades (0.x): still resolved, from their facade, for plugins
# written against them, with a DeprecationWarning at each use; not in __all__, and the built-ins
# import them from the facade. Type checkers do not see them (the module `__getattr__` below is
# hidden from them): `typing_extensions.deprecated` cannot mark constants, so an error there names
# the missing name rather than typing it as Any.
_MOVED: dict[str, str] = {
    "DATA_ENCODING": "negharness.api.files",
    "Dist": "negharness.api.devices",
    "MAX_CAPTION_CHARS": "negharness.api.files",
    "MCQ_METRICS": "negharness.api.scoring",
    "MediaSet": "negharness.api.media",
    "NEGATED_METRICS": "negharness.api.scoring",
    "QRELS_OPTION": "negharness.api.scoring",
    "QuerySet": "negharness.api.scoring",
    "RETRIEVAL_NEG_METRICS": "negharness.api.scoring",
    "Relevance": "negharness.api.scoring",
    "RootGuard": "negharness.api.files",
    "TEXT_TO_MEDIA_METRICS": "negharness.api.scoring",
    "atomic_write": "negharness.api.files",
    "atomic_write_bytes": "negharness.api.files",
    "atomic_write_json": "negharness.api.files",
    "atomic_write_text": "negharness.api.files",
    "base_note": "negharness.api.checkpoints",
    "best_relevant_rank": "negharness.api.scoring",
    "cache_root": "negharness.api.files",
    "cached_json": "negharness.api.files",
    "cell_captions": "negharness.api.files",
    "check_caption": "negharness.api.files",
    "check_csv_header": "negharness.api.files",
    "check_csv_width": "negharness.api.files",
    "collection_digest": "negharness.api.published",
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
    "image_files": "negharness.api.media",
    "literal_captions": "negharness.api.files",
    "load_frames": "negharness.api.media",
    "load_or_explain": "negharness.api.checkpoints",
    "load_state_dict": "negharness.api.checkpoints",
    "lower_priority": "negharness.api.devices",
    "numbered_rows": "negharness.api.files",
    "pair_scores": "negharness.api.scoring",
    "per_query": "negharness.api.scoring",
    "published_notes": "negharness.api.published",
    "query_scores": "negharness.api.scoring",
    "read_checkpoint": "negharness.api.checkpoints",
    "read_rgb": "negharness.api.media",
    "require_8bit": "negharness.api.media",
    "require_regular": "negharness.api.files",
    "resolve_device": "negharness.api.devices",
    "retrieval_metrics": "negharness.api.scoring",
    "save_safetensors": "negharness.api.checkpoints",
    "score_choices": "negharness.api.scoring",
    "similarities": "negharness.api.scoring",
    "tables_beside": "negharness.api.published",
    "task_qrels": "negharness.api.scoring",
    "video_files": "negharness.api.media",
}


# names of the face whose homes import torch: each imported when first asked (importing the face loads
# no torch); type checkers read them as the plain imports below, and a test keeps the two lists equal
_LAZY: dict[str, tuple[str, str]] = {
    "ChoiceSet": ("negharness.contracts.choices", "ChoiceSet"),
    "PRECISIONS": ("negharness.contracts.precision", "PRECISIONS"),
    "pad_scores": ("negharness.contracts.choices", "pad_scores"),
}

if TYPE_CHECKING:
    from negharness.contracts.choices import ChoiceSet as ChoiceSet, pad_scores as pad_scores
    from negharness.contracts.precision import PRECISIONS as PRECISIONS
else:
    def __getattr__(name: str) -> Any:
        """A name of `_LAZY`, imported now (and kept), or a moved or renamed 0.x name, through its facade
        (so both spellings are one object; not cached, so each use warns)."""
        import importlib
        import warnings

        if name in _LAZY:
            home, real = _LAZY[name]
            value = getattr(importlib.import_module(home), real)
            globals()[name] = value
            return value
        if name in _RENAMED:
            return _renamed(__name__, name)
        if name not in _MOVED:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        warnings.warn(f"negharness.api.{name} moved to {_MOVED[name]}: import it from there (the top-level "
                      f"name goes in a later release)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)


def __dir__() -> list[str]:
    return __all__
