"""Built-in task plugin: registered through negharness's own entry points, like any third-party one."""

from __future__ import annotations

from negharness.hookspecs import hookimpl
from negharness.registry import Registrar

from negharness.declarative import register_yaml_folder
from negharness.tasks.negbench.catalog import MCQ, RETRIEVAL
from negharness.tasks.nt2vr.collections import COLLECTIONS, QUERY_SETS

# caption generators the built-in YAML files may name (lazy: `list` imports no NLTK)
GENERATORS = {"aro_order_shuffles": "negharness.tasks.choice.aro_order:order_shuffles"}


@hookimpl
def negharness_register_tasks(registry: Registrar) -> None:
    registry.add("shapes_t2v_original", "negharness.tasks.shapes.retrieval:ShapesT2VOriginal",
                 "embedded world: text-to-video retrieval, original captions (no download)", family="shapes")
    registry.add("shapes_t2i_original", "negharness.tasks.shapes.retrieval:ShapesT2IOriginal",
                 "embedded world: text-to-image retrieval, original captions (no download)", family="shapes")
    registry.add("shapes_t2v_negated", "negharness.tasks.shapes.retrieval:ShapesT2VNegated",
                 "embedded world: negated captions (nT2VR negator), ΔR@K / ΔMIR against the originals",
                 family="shapes")
    registry.add("shapes_t2v_composed", "negharness.tasks.shapes.retrieval:ShapesT2VComposed",
                 "embedded world: composed 'A and not B' queries (nT2VR composer), several relevant videos",
                 family="shapes")
    for prefix, (collection, kind, what) in COLLECTIONS.items():
        for query_set in QUERY_SETS:
            registry.add(f"{prefix}_{query_set}", f"negharness.tasks.nt2vr.tasks:{prefix}_{query_set}",
                         f"nT2VR {query_set} queries, text-to-{kind}, {what}", family="nt2vr")
    for name, spec in {**MCQ, **RETRIEVAL}.items():
        registry.add(name, f"negharness.tasks.negbench.tasks:{name}", spec[-1], family="negbench")
    registry.add("shapes_mcq", "negharness.tasks.shapes.mcq:ShapesMCQ",
                 "embedded world: NegBench-style MCQ with exact ground truth (which shapes are present)",
                 family="shapes")
    registry.add("nein_shapes", "negharness.tasks.nein.shapes:ShapesNeIn",
                 "embedded world: NeIn-style editing with negative instructions (removal / retention)",
                 family="nein")
    registry.add("nein_val", "negharness.tasks.nein.tasks:NeInVal",
                 "NeIn validation set: editing with negative instructions, OWLv2 removal / retention",
                 family="nein")
    # the hard-negative choice suites (SugarCrepe, ARO, VALSE, CREPE, CC-Neg, NegVQA): YAML in tasks/choice/
    from importlib.resources import files

    register_yaml_folder(registry, files("negharness.tasks.choice"), GENERATORS)
