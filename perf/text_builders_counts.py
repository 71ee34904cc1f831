"""Composer and negator counts on the real MSR-VTT 1k-A captions (NegBench's CSV under ../shared).

    python perf/text_builders_counts.py [--sample SEED] [--out DIR]

Prints, for the default rule and for the authors' rule (``composer.AUTHORS_RULE``: negatives of two
or more content words, no person/someone/guy subjects, rare bare wordings dropped, 2 x 2 wordings),
the number of composed queries and of distinct (subject, A, B) triples against Table 1 of the nT2VR
paper, and the share of the 1,000 query captions (one per test video) the negator negates
(goal: 85-93%). MSR-VTT3k (18,157) and VATEX (8,394) are printed as "captions absent" unless their
caption files are given with ``--msrvtt3k`` / ``--vatex`` (``<cap_id> <caption>`` lines).

``--sample SEED`` writes the blind-grading files ``grade_composer_<SEED>.txt`` (100 default-rule
composed queries, uniform, with every target video's captions and the defect definition) and
``grade_negator_<SEED>.txt`` (100 negated query captions with their source). Use a seed never used
before for every grading, and never tune rules on a graded sample.

Set NEGHARNESS_SHARED when ../shared is not beside the checkout.
"""

from __future__ import annotations

import argparse
import ast
import csv
import os
import random
import time
from collections import defaultdict
from pathlib import Path

SHARED = Path(os.environ.get("NEGHARNESS_SHARED", Path(__file__).resolve().parents[1] / ".." / "shared"))
MSRVTT = SHARED / "data" / "negbench" / "negbench_eval_csvs" / "videos" / "msr_vtt_retrieval.csv"
TABLE1 = {"MSR-VTT1k": 3697, "MSR-VTT3k": 18157, "VATEX": 8394}  # composed queries, nT2VR Table 1

COMPOSER_DEFECTS = """\
A composed query is CORRECT when (1) it is grammatical English a person could type, with its phrases
whole (no particle or complement lost, e.g. "lying down" must not become "lie"; no garbled phrase; the
"not B" part does not contradict A), and (2) EVERY listed target video has a caption supporting
"subject does A" (with A's companions, e.g. "with others", the subject's numeral, e.g. "two men", and
particles) and NO caption of the video states B of that subject (a video captioned "a band is playing
and singing" is no target of "a band ... not singing"). Otherwise it is DEFECTIVE: mark W (wording)
or T (target, name the video)."""

NEGATOR_DEFECTS = """\
A negated caption is CORRECT when it is the source caption with one verb, auxiliary or "with" negated
(or an existing cue removed), and reads as English: the negated word is really a verb of the caption
(not a noun the tagger read as a verb, e.g. "vine", "photograph", "king"), with agreement and tense
kept ("a girl does not sing", "did not meet"). Mistakes already in the source caption do not count.
Otherwise mark it DEFECTIVE with the reason."""


def load_msrvtt() -> tuple[dict[str, list[str]], dict[str, str]]:
    """(video -> its ~20 captions, video -> the one query caption NegBench's file keeps)."""
    with open(MSRVTT, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return ({r["image_id"]: ast.literal_eval(r["all_captions"]) for r in rows},
            {r["image_id"]: ast.literal_eval(r["captions"])[0] for r in rows})


def load_caption_file(path: Path) -> dict[str, list[str]]:
    """``<video>#enc#<k> <caption>`` lines (nT2VR's caption.txt) grouped by video."""
    videos: dict[str, list[str]] = defaultdict(list)
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            cap_id, caption = line.split(None, 1)
            videos[cap_id.split("#", 1)[0]].append(caption)
    return dict(videos)


def counts(name: str, videos: dict[str, list[str]]):
    """Print both rules' counts for one collection; return the default rule's queries."""
    from negharness.text.composer import AUTHORS_RULE, CaptionIndex, compose

    t = time.time()
    index = CaptionIndex(list(videos), list(videos.values()))
    out = None
    for rule, kwargs in (("default", {}), ("authors' rule", AUTHORS_RULE)):
        queries = compose(index, seed=0, **kwargs)
        triples = {(q.subject, q.meta["a_key"], q.meta["b_key"]) for q in queries}
        paper = TABLE1[name]
        print(f"{name:10s} {rule:14s} composed {len(queries):6d} ({(len(queries) - paper) / paper:+.1%} vs Table 1 "
              f"{paper:,})  distinct (subject, A, B) {len(triples):6d}")
        out = out or queries
    print(f"{'':10s} {len(index.captions)} captions, {time.time() - t:.0f} s")
    return out


def negated(queries: dict[str, str]):
    from negharness.text.negator import negate

    done = {v: negate(c, "one", 0) for v, c in queries.items()}
    n = sum(bool(x) for x in done.values())
    print(f"negator: {n}/{len(done)} MSR-VTT 1k-A query captions negated ({n / len(done):.1%}; goal 85-93%)")
    return done


def write_samples(seed: int, out: Path, composed, videos, queries, done) -> None:
    rng = random.Random(seed)
    lines = [f"# composer grading sample, seed {seed}: 100 of {len(composed)} default-rule composed queries on "
             "MSR-VTT 1k-A, uniform", "", COMPOSER_DEFECTS, ""]
    for n, q in enumerate(rng.sample(composed, min(100, len(composed))), 1):
        lines += [f"[{n}] {q.caption}", f"    subject: {q.subject} | A: {q.positive} | not B: {q.negative}",
                  f"    targets: {len(q.video_ids)}"]
        for vid in q.video_ids:
            lines.append(f"    {vid}:")
            lines += [f"      - {c}" for c in videos[vid]]
        lines.append("")
    (out / f"grade_composer_{seed}.txt").write_text("\n".join(lines), encoding="utf-8")
    pool = [(v, queries[v], n[0].text) for v, n in done.items() if n]
    lines = [f"# negator grading sample, seed {seed}: 100 of {len(pool)} negated MSR-VTT 1k-A query captions, "
             "uniform", "", NEGATOR_DEFECTS, ""]
    for n, (vid, src, neg) in enumerate(rng.sample(pool, 100), 1):
        lines += [f"[{n}] {vid}", f"    source : {src}", f"    negated: {neg}", ""]
    (out / f"grade_negator_{seed}.txt").write_text("\n".join(lines), encoding="utf-8")
    write_unseen_negator_sample(seed, out, videos, queries)
    print("wrote", out / f"grade_composer_{seed}.txt", out / f"grade_negator_{seed}.txt",
          out / f"grade_negator_{seed}_other_captions.txt")


def write_unseen_negator_sample(seed: int, out: Path, videos, queries) -> None:
    """100 negations of the OTHER MSR-VTT 1k-A captions (not the 1,000 query captions the negator's
    rules were read against): a sample no rule was tuned on."""
    from negharness.text.negator import negate

    rng = random.Random(seed)
    others = sorted((v, c) for v, caps in videos.items() for c in set(caps) if c != queries[v])
    picked = []
    for vid, src in rng.sample(others, len(others)):
        neg = negate(src, "one", 0)
        if neg:
            picked.append((vid, src, neg[0].text))
        if len(picked) == 100:
            break
    lines = [f"# negator grading sample, seed {seed}: 100 negated captions drawn uniformly from the {len(others)} "
             "MSR-VTT 1k-A captions other than the query captions (captions with no rule applied skipped)", "",
             NEGATOR_DEFECTS, ""]
    for n, (vid, src, neg) in enumerate(picked, 1):
        lines += [f"[{n}] {vid}", f"    source : {src}", f"    negated: {neg}", ""]
    (out / f"grade_negator_{seed}_other_captions.txt").write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=None, help="write grading samples drawn with this seed")
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--msrvtt3k", type=Path, default=None, help="msrvtt10ktest.caption.txt, if you have it")
    ap.add_argument("--vatex", type=Path, default=None, help="vatex_test1k5.caption.txt, if you have it")
    args = ap.parse_args()
    if not MSRVTT.is_file():
        raise SystemExit(f"MSR-VTT 1k-A captions absent: {MSRVTT} (set NEGHARNESS_SHARED)")
    videos, queries = load_msrvtt()
    composed = counts("MSR-VTT1k", videos)
    for name, path in (("MSR-VTT3k", args.msrvtt3k), ("VATEX", args.vatex)):
        if path is None:
            print(f"{name:10s} captions absent (Table 1: {TABLE1[name]:,}); pass --{name.lower().replace('-', '')}")
        else:
            counts(name, load_caption_file(path))
    done = negated(queries)
    if args.sample is not None:
        write_samples(args.sample, args.out, composed, videos, queries, done)


if __name__ == "__main__":
    main()
