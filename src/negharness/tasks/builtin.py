"""Built-in task plugin: registered through negharness's own entry points, like any third-party one."""

from __future__ import annotations

from negharness.api import Registrar, hookimpl, register_yaml_folder
from negharness.tasks import negbench, nein, nt2vr
from negharness.tasks.negbench.catalog import MCQ, RETRIEVAL
from negharness.tasks.nt2vr.collections import COLLECTIONS, QUERY_SETS

# caption generators the built-in YAML files may name (lazy: `list` imports no NLTK)
GENERATORS = {"aro_order_shuffles": "negharness.tasks.choice.aro_order:order_shuffles"}

# training sets (kind "trainset"): named like tasks, read from the same data root
TRAINSETS = {
    "shapes": ("negharness.tasks.shapes.training:shapes", "embedded world: videos + images with soft negatives, "
               "true negations and MCQs (no download)"),
    "captions": ("negharness.tasks.nt2vr.training:captions", "your own captions: -T file=CSV|TXT|JSON -T media=DIR"),
    "msrvtt10ktrain": ("negharness.tasks.nt2vr.training:msrvtt10ktrain", "nT2VR: MSR-VTT official train (7k), val msrvtt10kval"),
    "msrvtt1kAtrain": ("negharness.tasks.nt2vr.training:msrvtt1kAtrain", "nT2VR: MSR-VTT 9k train (JSFusion), val msrvtt1kAval"),
    "vatex_train": ("negharness.tasks.nt2vr.training:vatex_train", "nT2VR: VATEX train (HGR split), val vatex_val1k5"),
    "flickr30ktrain": ("negharness.tasks.nt2vr.training:flickr30ktrain", "nT2VR appendix A.3: Flickr30k train, val flickr30kval"),
    "mscocotrain": ("negharness.tasks.nt2vr.training:mscocotrain", "nT2VR appendix A.3: MS-COCO train, val mscocoval"),
    "negbench_negcap": ("negharness.tasks.negbench.training:negbench_negcap", "NegBench CC12M-NegCap captions CSV"),
    "negbench_negmcq": ("negharness.tasks.negbench.training:negbench_negmcq", "NegBench CC12M-NegMCQ MCQ CSV"),
    "negbench_negfull": ("negharness.tasks.negbench.training:negbench_negfull", "NegBench CC12M-NegFull: NegCap + NegMCQ"),
    "negbench_cc12m": ("negharness.tasks.negbench.training:negbench_cc12m", "NegBench Table 1 control: plain CC12M captions"),
}


@hookimpl
def negharness_register_query_builders(registry: Registrar) -> None:
    registry.add("nt2vr", "negharness.text.build_queries:nt2vr_builder",
                 "nT2VR's negator (negated queries) and composer ('A and not B' composed queries)")


@hookimpl
def negharness_register_trainsets(registry: Registrar) -> None:
    for name, (target, what) in TRAINSETS.items():
        registry.add(name, target, what)


@hookimpl
def negharness_register_tasks(registry: Registrar) -> None:
    registry.add("simpleneg", "negharness.tasks.judged.retrieval:SimpleNeg",
                 "SimpleNeg: top-5 COCO val2014 retrieval of negated queries, judged by a VLM (needs --judge)",
                 family="judged")
    # a glob ('msrvtt3k_*') leaves these out of a run without --judge (`negharness.engine.judging.judged_by_glob`)
    for prefix in ("msrvtt3k", "msrvtt1k", "vatex", "mscoco", "flickr30k"):
        registry.add(f"{prefix}_composed_judged", f"negharness.tasks.judged.nt2vr:{prefix}_composed_judged",
                     f"nT2VR composed queries ({prefix}): top-K judged negation precision (needs --judge)",
                     family="judged")
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
                         f"nT2VR {query_set} queries, text-to-{kind}, {what}", family="nt2vr",
                         published=nt2vr.PUBLISHED)
    for name, spec in {**MCQ, **RETRIEVAL}.items():
        registry.add(name, f"negharness.tasks.negbench.tasks:{name}", spec[-1], family="negbench",
                     published=negbench.PUBLISHED)
    registry.add("shapes_mcq", "negharness.tasks.shapes.mcq:ShapesMCQ",
                 "embedded world: NegBench-style MCQ with exact ground truth (which shapes are present)",
                 family="shapes")
    registry.add("nein_shapes", "negharness.tasks.nein.shapes:ShapesNeIn",
                 "embedded world: NeIn-style editing with negative instructions (removal / retention)",
                 family="nein")
    registry.add("nein_val", "negharness.tasks.nein.tasks:NeInVal",
                 "NeIn validation set: editing with negative instructions, OWLv2 removal / retention",
                 family="nein", published=nein.PUBLISHED)
    # the hard-negative choice suites (SugarCrepe, ARO, VALSE, CREPE, CC-Neg, NegVQA): YAML in tasks/choice/
    from importlib.resources import files

    register_yaml_folder(registry, files("negharness.tasks.choice"), GENERATORS)
