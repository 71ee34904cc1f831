"""negharness.api: the one public face of the host, for model, task, trainer and editor plugins.

Built-in and third-party plugins import this and nothing else of the host; everything outside
``__all__`` is internal and may change between releases. It holds the contracts (what a plugin
implements: `Task`, `EmbeddingModel`, `Editor`, `Detector`, training sets), the run context a task
receives (`EvalContext`, `EditContext`), options, errors, result types, and the helpers a task
scores with (`evaluate_text_to_media`, `evaluate_mcq`, `score_choices`, the metrics).

Names resolve on first use (PEP 562), so a plugin's registration module that imports `hookimpl`
and `Registrar` from here keeps `negharness list` free of torch; `_EXPORTS` is the whole contract.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from negharness.version import HOOK_API, __version__

# public name -> the host module that defines it (the module itself where the name is a module)
_EXPORTS: dict[str, str] = {
    # plugin registration
    "hookimpl": "negharness.discovery.hookspecs", "Registrar": "negharness.discovery.registry",
    "register_yaml_folder": "negharness.declarative.register", "installed_plugins": "negharness.discovery.lookup",
    # errors
    "UserError": "negharness.api.errors", "MediaError": "negharness.api.errors",
    "MissingDataError": "negharness.api.errors",
    # options
    "OptionSpec": "negharness.api.options", "parse_options": "negharness.api.options",
    "takes_options": "negharness.api.options",
    "check_batch_size": "negharness.api.options",
    "parse_bool": "negharness.api.options",
    "PRECISIONS": "negharness.api.precision", "resolve_precision": "negharness.api.precision",
    "autocast": "negharness.api.precision", "cpu_autocast_warning": "negharness.api.precision",
    # tasks and results
    "Task": "negharness.api.task", "TaskOptions": "negharness.api.task",
    "TaskResult": "negharness.api.task", "MetricInfo": "negharness.api.task",
    # models
    "EmbeddingModel": "negharness.api.model", "ChoiceScorer": "negharness.api.model", "ModelPlugin": "negharness.api.model", "ModelOptions": "negharness.api.model",
    "hash_state_dict": "negharness.api.model", "array_to_tensor": "negharness.api.model",
    "jpeg_draft": "negharness.api.model", "FrameSampling": "negharness.api.sampling",
    "hash_json": "negharness.api.hashing",
    # the run context
    "EvalContext": "negharness.api.context", "RunContext": "negharness.api.context",
    "PluginSource": "negharness.api.plugin_source", "EditContext": "negharness.engine.edit_context",
    # editing
    "Editor": "negharness.api.editing", "Detector": "negharness.api.editing",
    "Detection": "negharness.api.editing",
    # training
    "TrainOptions": "negharness.api.training", "TrainSetOptions": "negharness.api.training",
    "TrainStream": "negharness.api.training", "TrainingSet": "negharness.api.training",
    "named_trainset": "negharness.api.training", "distributed": "negharness.engine.distributed",
    "Dist": "negharness.engine.distributed", "gather_batch": "negharness.engine.distributed",
    "resolve_device": "negharness.engine.runner", "lower_priority": "negharness.engine.runner",
    # scoring helpers a task calls
    "ChoiceSet": "negharness.api.choices", "pad_scores": "negharness.api.choices",
    "score_choices": "negharness.scoring.choices",
    "evaluate_mcq": "negharness.scoring.mcq", "MCQ_METRICS": "negharness.scoring.mcq",
    "evaluate_text_to_media": "negharness.scoring.retrieval", "evaluate_negated": "negharness.scoring.retrieval",
    "QuerySet": "negharness.scoring.retrieval", "similarities": "negharness.scoring.retrieval",
    "query_scores": "negharness.scoring.views", "pair_scores": "negharness.scoring.views",
    "drop_unreadable": "negharness.scoring.retrieval", "task_qrels": "negharness.scoring.retrieval",
    "RETRIEVAL_METRICS": "negharness.scoring.retrieval", "NEGATED_METRICS": "negharness.scoring.retrieval",
    "QRELS_OPTION": "negharness.scoring.retrieval",
    "Relevance": "negharness.scoring.metrics", "best_relevant_rank": "negharness.scoring.metrics",
    "retrieval_metrics": "negharness.scoring.metrics", "per_query": "negharness.scoring.perquery",
    # media, files, checkpoints
    "MediaSet": "negharness.io.media", "image_files": "negharness.io.media", "video_files": "negharness.io.media",
    "frame_folders": "negharness.io.media", "decode_video": "negharness.io.video", "load_frames": "negharness.io.video",
    "require_8bit": "negharness.io.image_files", "read_rgb": "negharness.io.image_files",
    "RootGuard": "negharness.io.paths", "data_root": "negharness.io.paths", "cache_root": "negharness.io.paths",
    "require_regular": "negharness.io.paths", "load_or_explain": "negharness.io.hub",
    "check_csv_header": "negharness.io.csv_rows", "check_csv_width": "negharness.io.csv_rows",
    "numbered_rows": "negharness.io.csv_rows", "check_caption": "negharness.io.csv_rows",
    "literal_captions": "negharness.io.csv_rows", "looks_like_literal": "negharness.io.csv_rows", "MAX_CAPTION_CHARS": "negharness.io.csv_rows",
    "DATA_ENCODING": "negharness.io.csv_rows",
    "base_note": "negharness.io.checkpoints", "fit_state_dict": "negharness.io.checkpoints",
    "load_state_dict": "negharness.io.checkpoints", "read_checkpoint": "negharness.io.checkpoints",
    "save_safetensors": "negharness.io.checkpoints",
    "atomic_write": "negharness.store.atomic", "atomic_write_bytes": "negharness.store.atomic",
    "atomic_write_json": "negharness.store.atomic", "atomic_write_text": "negharness.store.atomic",
    "cached_json": "negharness.store.atomic", "hash_array": "negharness.store.content",
    # published numbers
    "published_notes": "negharness.records.published", "collection_digest": "negharness.records.published",
    "QueryBuild": "negharness.api.queries",
    "QueryBuildOptions": "negharness.api.queries",
    "tables_beside": "negharness.records.published",
}

__all__ = sorted(["HOOK_API", "__version__", *_EXPORTS])


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'negharness.api' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if module.__name__.rsplit(".", 1)[-1] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what type checkers and IDEs read; the same names as _EXPORTS
    from negharness.api.choices import ChoiceSet, pad_scores
    from negharness.api.context import EvalContext, RunContext
    from negharness.api.plugin_source import PluginSource
    from negharness.api.editing import Detection, Detector, Editor
    from negharness.api.errors import MediaError, MissingDataError, UserError
    from negharness.api.hashing import hash_json
    from negharness.api.model import (
        ChoiceScorer,
        EmbeddingModel,
        ModelPlugin,
        ModelOptions,
        array_to_tensor,
        hash_state_dict,
        jpeg_draft,
    )
    from negharness.api.options import (
        OptionSpec,
        check_batch_size,
        parse_bool,
        parse_options,
        takes_options,
    )
    from negharness.api.precision import (
        PRECISIONS,
        autocast,
        cpu_autocast_warning,
        resolve_precision,
    )
    from negharness.api.queries import QueryBuild, QueryBuildOptions
    from negharness.api.sampling import FrameSampling
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
    from negharness.engine import distributed
    from negharness.engine.distributed import Dist, gather_batch
    from negharness.engine.edit_context import EditContext
    from negharness.engine.runner import lower_priority, resolve_device
    from negharness.io.checkpoints import (
        base_note,
        fit_state_dict,
        load_state_dict,
        read_checkpoint,
        save_safetensors,
    )
    from negharness.io.csv_rows import (
        DATA_ENCODING,
        MAX_CAPTION_CHARS,
        check_caption,
        check_csv_header,
        check_csv_width,
        literal_captions,
        looks_like_literal,
        numbered_rows,
    )
    from negharness.io.hub import load_or_explain
    from negharness.io.image_files import read_rgb, require_8bit
    from negharness.io.media import MediaSet, frame_folders, image_files, video_files
    from negharness.io.paths import RootGuard, cache_root, data_root, require_regular
    from negharness.io.video import decode_video, load_frames
    from negharness.records.published import collection_digest, published_notes, tables_beside
    from negharness.scoring.choices import score_choices
    from negharness.scoring.mcq import MCQ_METRICS, evaluate_mcq
    from negharness.scoring.metrics import (
        Relevance,
        best_relevant_rank,
        retrieval_metrics,
    )
    from negharness.scoring.perquery import per_query
    from negharness.scoring.retrieval import (
        NEGATED_METRICS,
        QRELS_OPTION,
        RETRIEVAL_METRICS,
        QuerySet,
        drop_unreadable,
        evaluate_negated,
        evaluate_text_to_media,
        similarities,
        task_qrels,
    )
    from negharness.scoring.views import pair_scores, query_scores
    from negharness.store.atomic import (
        atomic_write,
        atomic_write_bytes,
        atomic_write_json,
        atomic_write_text,
        cached_json,
    )
    from negharness.store.content import hash_array
