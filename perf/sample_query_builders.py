"""A grading sheet for the query builders, in the shared rubric's format (../shared/rubrics/query_builders.md).

    NLTK_DATA=../shared/nltk_data PYTHONPATH=src python perf/sample_query_builders.py --seed S [--n 100] [--out DIR]

Builds at default settings on MSR-VTT 1k-A's 19,998 test captions (what ``negharness build-queries``
does on them: one negated variant per caption, query seed 0, 5 subjects per pairing), then draws
with ``--seed`` ``--n`` composed queries (each with the captions of its target videos: all, or 6 drawn
at random when there are more) and ``--n`` negated captions (original -> negated). Prints the counts
(distinct composed queries, negated share of the 1,000 query captions) and writes
``query_builders_sheet_<S>.txt``. Draw a seed never used before for every grading; the grades go to
``perf/query_builder_grades.json``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from text_builders_counts import MSRVTT, load_msrvtt  # noqa: E402

SHOWN = 6  # target videos shown per composed query, as the rubric says


def sheet(seed: int, n: int) -> tuple[str, dict]:
    """(the grading sheet's text, the counts)."""
    from negharness.text.build_queries import build
    from negharness.text.negator import negate
    from negharness.text.build_queries import BUILDER_VERSION

    videos, queries = load_msrvtt()
    built = build(list(videos.items()))
    negated_queries = sum(bool(negate(c, "one", 0)) for c in queries.values())
    counts = {"builder_version": BUILDER_VERSION, "captions": len(built.captions),
              "composed": len(built.composed), "composed_distinct": len({q.caption for q in built.composed}),
              "negated": len(built.negated),
              "negated_share_of_query_captions": round(negated_queries / len(queries), 3)}
    rng = random.Random(seed)
    lines = [f"# query builders' grading sheet, seed {seed}, builder version {BUILDER_VERSION}: MSR-VTT 1k-A "
             f"at default settings ({counts['composed']} composed, {counts['negated']} negated)", "",
             "## Composed queries (A and not B) with their target videos' captions", ""]
    for k, q in enumerate(rng.sample(built.composed, min(n, len(built.composed))), 1):
        shown = q.video_ids if len(q.video_ids) <= SHOWN else sorted(rng.sample(q.video_ids, SHOWN))
        lines += [f"[C{k}] {q.caption}", f"    targets: {len(q.video_ids)} (shown: {len(shown)})"]
        for vid in shown:
            lines.append(f"    {vid}:")
            lines += [f"      - {c}" for c in videos[vid]]
        lines.append("")
    lines += ["## Negated captions (original -> negated)", ""]
    originals = dict(built.captions)
    for k, (cap_id, neg) in enumerate(rng.sample(built.negated, min(n, len(built.negated))), 1):
        lines += [f"[N{k}] {originals[cap_id.rsplit('#', 1)[0]]}", f"   -> {neg.text}", ""]
    return "\n".join(lines), counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True, help="a seed never used for a grading before")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    if not MSRVTT.is_file():
        raise SystemExit(f"MSR-VTT 1k-A captions absent: {MSRVTT} (set NEGHARNESS_SHARED)")
    text, counts = sheet(args.seed, args.n)
    path = args.out / f"query_builders_sheet_{args.seed}.txt"
    path.write_text(text + "\n", encoding="utf-8")
    print(*(f"{k}: {v}" for k, v in counts.items()), sep="\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
