"""NegBench's task list (no heavy imports: the task registry reads it at start-up).

MCQ layouts: where a file fixes each option position's template, position by position ("*" is the
correct answer's own template, given per row); None derives templates from the captions.
"""

COCO_LAYOUT = ("*", "hybrid", "positive", "negative")  # correct first; then "N but not A", "N", "not A"
SYN_LAYOUT = ("positive", "hybrid", "hybrid", "negative")  # "A and B", "A not B", "B not A", "neither"

# The authors' binary schema (their CsvBinaryMCQDataset): image_path, caption_0, caption_1, correct_answer.
# File names as their datasets.md lists them (their params.py defaults name chexpert_binary_mcq_random.csv and
# chexpert_binary_mcq_no_negation_random.csv for the same two tasks).
BINARY = frozenset({"negbench_mcq_chexpert_binary", "negbench_mcq_chexpert_binary_control"})

# task name -> (csv file, media kind, layout, description); published numbers: published/*.csv
MCQ = {
    "negbench_mcq_coco": ("COCO_val_mcq_llama3.1_rephrased.csv", "image", COCO_LAYOUT,
                          "NegBench MCQ-Neg, COCO val2017, paraphrased (5,914 questions)"),
    "negbench_mcq_voc2007": ("VOC2007_mcq_llama3.1_rephrased.csv", "image", COCO_LAYOUT,
                             "NegBench MCQ-Neg, VOC2007, paraphrased (5,031 questions)"),
    "negbench_mcq_voc2007_templated": ("VOC2007_mcq.csv", "image", COCO_LAYOUT,
                                       "NegBench MCQ-Neg, VOC2007, templated wording"),
    "negbench_mcq_msrvtt": ("msr_vtt_mcq_rephrased_llama.csv", "video", COCO_LAYOUT,
                            "NegBench MCQ-Neg, MSR-VTT 1k-A videos, paraphrased"),
    "negbench_mcq_msrvtt_templated": ("msr_vtt_mcq_templated.csv", "video", None,
                                      "NegBench MCQ-Neg, MSR-VTT, templated (shuffled answer positions)"),
    "negbench_mcq_hardneg_syn": ("synthetic_mcq_llama3.1_rephrased.csv", "image", SYN_LAYOUT,
                                 "NegBench MCQ-Neg, HardNeg-Syn (Stable Diffusion images)"),
    "negbench_mcq_chexpert_binary": ("chexpert_binary_mcq.csv", "image", None,
                                     "NegBench CheXpert binary (2-option) negation task, when its CSV is present"),
    "negbench_mcq_chexpert_binary_control": ("chexpert_binary_mcq_control.csv", "image", None,
                                             "NegBench CheXpert binary affirmation control, when its CSV is present"),
    "negbench_mcq_chexpert": ("chexpert_mcq.csv", "image", None,
                              "NegBench CheXpert 4-option MCQ, when its CSV is present"),
    "negbench_mcq_chexpert_control": ("chexpert_mcq_no_negation.csv", "image", None,
                                      "NegBench CheXpert 4-option affirmation control (no negation), when its CSV is present"),
}

# task name -> (original csv, negated csv, media kind, description)
RETRIEVAL = {
    "negbench_retrieval_coco": ("COCO_val_retrieval.csv", "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv",
                                "image", "NegBench Retrieval-Neg, COCO val2017 (25k captions), original vs negated"),
    "negbench_retrieval_coco_templated": ("COCO_val_retrieval.csv", "COCO_val_negated_retrieval_template.csv", "image",
                                          "NegBench Retrieval-Neg, COCO, templated negations"),
    "negbench_retrieval_msrvtt": ("msr_vtt_retrieval.csv", "msr_vtt_retrieval_rephrased_llama.csv", "video",
                                  "NegBench Retrieval-Neg, MSR-VTT 1k-A text-to-video, original vs negated"),
    "negbench_retrieval_hardneg_syn": ("synthetic_retrieval_v1.csv", "synthetic_retrieval_v2.csv", "image",
                                       "NegBench Retrieval-Neg, HardNeg-Syn (v1 originals, v2 with edited negatives)"),
}
