"""Built-in model plugin: registered through negharness's own entry points, like any third-party one."""

from __future__ import annotations

from negharness.api import Registrar, hookimpl

# each model, editor and detector names its options' declaration, in a module without torch: `run` checks
# -M there before torch loads, and the factory is decorated with the same object
DECLARED = "negharness.plugins.options"


@hookimpl
def negharness_register_models(registry: Registrar) -> None:
    registry.add("clip", "negharness.plugins.openclip_model:clip",
                 "open_clip CLIP: ViT-B-32/openai by default; --arch, --pretrained or --checkpoint",
                 options=f"{DECLARED}:OPEN_CLIP")
    registry.add("negclip", "negharness.plugins.finetuned_clip:negclip",
                 "NegCLIP ViT-B/32 from a local --checkpoint (QuickGELU by default)",
                 options=f"{DECLARED}:OPEN_CLIP")
    registry.add("conclip", "negharness.plugins.finetuned_clip:conclip",
                 "ConCLIP ViT-B/32 from a local --checkpoint (QuickGELU by default)",
                 options=f"{DECLARED}:OPEN_CLIP")
    registry.add("negationclip", "negharness.plugins.finetuned_clip:negationclip",
                 "NegationCLIP from a local --checkpoint (ViT-B/32, B/16, L/14, L/14@336 by its shapes; QuickGELU)",
                 options=f"{DECLARED}:OPEN_CLIP")
    registry.add("tripletclip", "negharness.plugins.finetuned_clip:tripletclip",
                 "TripletCLIP's open_clip checkpoint from a local --checkpoint (ViT-B-32, GELU)",
                 options=f"{DECLARED}:OPEN_CLIP")
    registry.add("clip4clip", "negharness.plugins.clip4clip:clip4clip",
                 "CLIP4Clip checkpoint (meanP or seqTransf head, from its own layout)",
                 options=f"{DECLARED}:CLIP4CLIP")
    registry.add("hf_clip", "negharness.plugins.hf_clip:hf_clip",
                 "CLIP or SigLIP through transformers: --arch MODEL_ID_OR_FOLDER",
                 options=f"{DECLARED}:HF_CLIP")
    registry.add("boolean", "negharness.plugins.boolean_model:boolean",
                 "boolean baseline around any model (-M base=NAME): s(positive) - s(negative)",
                 options=f"{DECLARED}:BOOLEAN",  # wraps="base": the weights checked before torch are its base's
                 weights="base",  # its weights are its base's: `negharness.engine.fingerprints.memo_key`
                 training_free="negharness run --model boolean -M base=clip")  # beside the trainers: `cli.training_free`
    registry.add("steer", "negharness.plugins.steering:steer",
                 "negation steering (Sammani et al.) of an open_clip model's text (-M base=NAME, -M alpha, -M pairs=FILE)",
                 options=f"{DECLARED}:STEER",  # wraps="base", as boolean
                 training_free="negharness run --model steer -M base=clip -M alpha=0.13")
    registry.add("clip_bnl", "negharness.plugins.trained_model:clip_bnl",
                 "a model fine-tuned by `negharness train` (--checkpoint DIR)",
                 options=f"{DECLARED}:CLIP_BNL",
                 checkpoint="required")  # said before torch loads: `negharness.engine.precheck`
    registry.add("dino", "negharness.plugins.dino_similarity:dino",
                 "DINO ViT-S/16 image embeddings (NeIn's DINO score): --arch ID_OR_FOLDER; images only",
                 options=f"{DECLARED}:NO_OPTIONS")
    registry.add("hf_vlm", "negharness.plugins.hf_vlm:hf_vlm",
                 "generative VLM (LLaVA, Qwen-VL) through transformers, choice tasks only: --arch ID_OR_FOLDER, "
                 "-M scoring=loglik|letter",
                 options=f"{DECLARED}:HF_VLM")
    registry.add("text_only", "negharness.plugins.text_only:text_only",
                 "blind baseline: a causal LM's caption likelihood without the image (--arch gpt2), choice tasks only",
                 options=f"{DECLARED}:TEXT_ONLY")
    registry.add("shapes_clip", "negharness.plugins.shapes_clip:shapes_clip",
                 "tiny CLIP trained on the embedded world (bundled weights, no download)",
                 options=f"{DECLARED}:OPEN_CLIP",
                 weights="bundled")  # in the package: its stamp sees them (`negharness.engine.fingerprints`)


@hookimpl
def negharness_register_editors(registry: Registrar) -> None:
    registry.add("identity", "negharness.plugins.reference_editors:identity",
                 "reference editor: returns its input (a floor for removal)",
                 options=f"{DECLARED}:NO_OPTIONS")
    registry.add("instruct_pix2pix", "negharness.plugins.instruct_pix2pix:instruct_pix2pix",
                 "InstructPix2Pix / MagicBrush through diffusers (-M model=ID_OR_FOLDER)",
                 options=f"{DECLARED}:INSTRUCT_PIX2PIX")
    registry.add("detect_inpaint", "negharness.plugins.reference_editors:detect_inpaint",
                 "reference editor: inpaints what a detector finds for the negated object (-M detector=NAME)",
                 options=f"{DECLARED}:DETECT_INPAINT")


@hookimpl
def negharness_register_detectors(registry: Registrar) -> None:
    registry.add("shapes_exact", "negharness.plugins.shapes_detector:shapes_exact",
                 "rule-based detector of the embedded world's coloured shapes",
                 options=f"{DECLARED}:NO_OPTIONS")
    registry.add("owlv2", "negharness.plugins.owlv2_detector:owlv2",
                 "OWLv2 zero-shot detection through transformers (threshold 0.1, as NeIn)",
                 options=f"{DECLARED}:OWLV2")


@hookimpl
def negharness_register_judges(registry: Registrar) -> None:
    registry.add("hf_vlm_judge", "negharness.plugins.judges:hf_vlm_judge",
                 "a transformers VLM answering yes/no about an image (-J arch=Qwen/Qwen3-VL-4B-Instruct)",
                 options="negharness.plugins.judges:HF_JUDGE_OPTIONS")  # the judges' module imports no torch
    registry.add("openai_judge", "negharness.plugins.judges:openai_judge",
                 "an OpenAI-compatible chat endpoint (vllm serve, SGLang, llama.cpp): -J url=... -J model=...",
                 options="negharness.plugins.judges:OPENAI_JUDGE_OPTIONS")
