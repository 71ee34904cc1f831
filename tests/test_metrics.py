"""Retrieval metrics against hand-worked values."""

import numpy as np
import pytest
import torch

from negharness.scoring.metrics import (
    Relevance,
    best_relevant_rank,
    retrieval_metrics,
    source_rank,
)


def test_single_relevant_ranks_by_hand():
    sim = torch.tensor([[0.9, 0.1, 0.5],   # relevant 0 is first          -> rank 1
                        [0.9, 0.1, 0.5],   # relevant 1 is last           -> rank 3
                        [0.2, 0.8, 0.5]])  # relevant 2 behind item 1      -> rank 2
    rel = Relevance.from_lists([[0], [1], [2]], 3)
    ranks = best_relevant_rank(sim, rel)
    assert ranks.tolist() == [1, 3, 2]
    m = retrieval_metrics(ranks, ks=(1, 2))
    assert m["R@1"] == pytest.approx(100 / 3)
    assert m["R@2"] == pytest.approx(200 / 3)
    assert m["MIR"] == pytest.approx((1 + 1 / 3 + 1 / 2) / 3)
    assert m["MedR"] == 2 and m["MeanR"] == pytest.approx(2.0)


def test_ties_are_pessimistic_never_list_order():
    sim = torch.zeros(2, 4)  # a model that scores everything the same
    ranks = best_relevant_rank(sim, Relevance.from_lists([[0], [3]], 4))
    assert ranks.tolist() == [4, 4]
    partial = torch.tensor([[0.5, 0.5, 0.1, 0.9]])  # one irrelevant tie and one irrelevant above
    assert best_relevant_rank(partial, Relevance.from_lists([[0]], 4)).tolist() == [3]


def test_several_relevant_uses_best_placed():
    sim = torch.tensor([[0.1, 0.7, 0.9, 0.3, 0.8]])
    rel = Relevance.from_lists([[0, 4, 3]], 5)  # best relevant is item 4 (0.8), behind item 2 only
    assert best_relevant_rank(sim, rel).tolist() == [2]
    # ties among relevant items do not push each other down
    sim2 = torch.tensor([[0.5, 0.5, 0.4]])
    assert best_relevant_rank(sim2, Relevance.from_lists([[0, 1]], 3)).tolist() == [1]


def test_relevance_from_groups_and_chunking_agree():
    rng = np.random.default_rng(0)
    items = [str(g) for g in rng.integers(0, 7, size=50)]
    queries = [items[i] for i in rng.integers(0, 50, size=120)]
    rel = Relevance.from_groups(queries, items)
    sim = torch.from_numpy(rng.standard_normal((120, 50)).astype(np.float32))
    whole = best_relevant_rank(sim, rel, chunk=1000)
    assert torch.equal(whole, best_relevant_rank(sim, rel, chunk=7))
    # brute force for one query
    q = 5
    relevant = [j for j in range(50) if items[j] == queries[q]]
    best = max(sim[q, j] for j in relevant)
    expected = 1 + sum(1 for j in range(50) if j not in relevant and sim[q, j] >= best)
    assert whole[q] == expected


def test_source_rank_and_errors():
    sim = torch.tensor([[0.2, 0.9, 0.2], [0.3, 0.3, 0.3]])
    assert source_rank(sim, [0, 2]).tolist() == [3, 3]
    with pytest.raises(ValueError):
        Relevance.from_lists([[0], []], 3)
    with pytest.raises(ValueError):
        best_relevant_rank(sim, Relevance.from_lists([[0]], 3))


def test_average_precision_by_hand():
    # relevant items 0 and 2; ranking: 1 (irrelevant), 0 (relevant), 3, 2 (relevant)
    sim = torch.tensor([[0.8, 0.9, 0.1, 0.5],
                        [0.1, 0.9, 0.3, 0.2]])  # second query: one relevant (item 2) at rank 2
    rel = Relevance.from_lists([[0, 2], [2]], 4)
    from negharness.scoring.metrics import average_precision, several_relevant_metrics
    ap = average_precision(sim, rel)
    assert ap[0] == pytest.approx((1 / 2 + 2 / 4) / 2)  # precision at ranks 2 and 4
    assert ap[1] == pytest.approx(1 / 2)
    ties = torch.tensor([[0.5, 0.5, 0.5, 0.1]])  # relevant 0 and 1 tied with irrelevant 2: pessimistic
    assert average_precision(ties, Relevance.from_lists([[0, 1]], 4))[0] == pytest.approx((1 / 2 + 2 / 3) / 2)
    m = several_relevant_metrics(sim, rel, best_relevant_rank(sim, rel), ks=(1, 2))
    assert m["C@1"] == 0.0 and m["C@2"] == 100.0 and m["mAP"] == pytest.approx(0.5)


def test_negation_deltas_with_a_source_video_that_climbs():
    from negharness.scoring.metrics import negation_deltas
    orig = torch.tensor([1, 4, 20])  # source video rank under each negated query's original
    neg = torch.tensor([3, 2, 20])   # under the negated query: down, *up* (the model got it backwards), same
    d = negation_deltas(orig, neg, ks=(1, 5))
    assert d["ΔR@1"] == pytest.approx(100 / 3)  # only the first query left the top 1
    assert d["ΔR@5"] == pytest.approx(0.0)
    assert d["ΔMIR"] == pytest.approx(((1 - 1 / 3) + (1 / 4 - 1 / 2) + 0) / 3)
    assert d["SrcMeanR_orig"] == pytest.approx(25 / 3) and d["SrcMeanR_neg"] == pytest.approx(25 / 3)


def test_single_relevant_fast_path_matches_masked_path():
    rng = np.random.default_rng(3)
    sim = torch.from_numpy(rng.integers(0, 5, size=(40, 30)).astype(np.float32))  # many ties
    src = rng.integers(0, 30, size=40)
    single = best_relevant_rank(sim, Relevance.from_lists([[int(s)] for s in src], 30))
    masked = torch.stack([best_relevant_rank(sim[i:i + 1], Relevance.from_lists([[int(src[i]), int(src[i])]], 30))[0]
                          for i in range(40)])
    assert torch.equal(single, masked)


def test_bootstrap_intervals():
    from negharness.scoring.bootstrap import bootstrap_estimates, paired_test
    values = np.r_[np.zeros(500), np.ones(500)]
    found = bootstrap_estimates({"m": list(values)}, n=500)["m"]
    assert found.lo < 0.5 < found.hi and found.hi - found.lo < 0.1
    a = np.random.default_rng(0).random(400)
    res = paired_test(a, a + 0.1, n=500)
    assert res.lo == pytest.approx(0.1) and res.hi == pytest.approx(0.1) and res.p_value == pytest.approx(1 / 501)
    with pytest.raises(ValueError):
        paired_test(a, a[:10])


def test_one_catalogue_names_every_metric_the_scorers_write_and_every_place_reads():
    """Four spellings once disagreed (YAML MdR, scoring MedR): every scorer's keys, every declared
    metric_info and the YAML checker's names are the catalogue's, with its direction and format."""
    from negharness.declarative import spec
    from negharness.scoring import catalog
    from negharness.scoring.choices import choice_scoring, same_words_metrics
    from negharness.scoring.fire import FIRE_METRICS
    from negharness.scoring.mcq import MCQ_METRICS, mcq_metrics
    from negharness.scoring.metrics import Relevance, negation_deltas, retrieval_metrics, several_relevant_metrics
    from negharness.scoring.retrieval import NEGATED_METRICS, RETRIEVAL_NEG_METRICS, TEXT_TO_MEDIA_METRICS

    def names(protocol):
        return {m.name for m in catalog.METRICS.values() if protocol in m.protocols}

    ranks = torch.tensor([1, 3, 2])
    sim = torch.rand(3, 4)
    assert set(retrieval_metrics(ranks)) == names("retrieval")
    assert set(several_relevant_metrics(sim, Relevance.from_lists([[0], [1], [2, 3]], 4), ranks)) == names("several")
    assert set(negation_deltas(ranks, ranks)) == names("deltas")
    assert set(FIRE_METRICS) == names("fire")
    scores = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    out = choice_scoring(scores, [0, 0, 1], ["a", "b", "a"], authors_ties="first", options=[["x y", "y x"]] * 3)
    assert set(out.metrics) == names("choice")
    t = ["positive", "negative", "hybrid"]
    same = same_words_metrics([t, t, t], [0, 0, 0], np.ones(3, dtype=bool))[0]  # evaluate_mcq adds them
    assert set(mcq_metrics(torch.tensor([0, 1, 0]), torch.zeros(3, dtype=torch.bool), [0, 0, 0], t,
                           [t, t, t])) | set(same) == names("mcq")
    for declared in (MCQ_METRICS, TEXT_TO_MEDIA_METRICS, NEGATED_METRICS, RETRIEVAL_NEG_METRICS,
                     spec.CHOICE_METRICS, spec.YAML_RETRIEVAL_METRICS):
        assert declared == {k: catalog.METRICS[k].info for k in declared}
    assert set(spec.YAML_RETRIEVAL_METRICS) == names("retrieval")
    assert all(catalog.canonical(a) in spec.YAML_RETRIEVAL_METRICS for a in catalog.ALIASES)
    # a metric that is no mean of its own values is recomputed from its source, prefixed names too
    assert catalog.derivation("neg_MedR", {"neg_MeanR": []})[0] == "neg_MeanR"
    assert catalog.derivation("MedR", {"R@1": []}) is None


def test_leaderboard_check_refuses_a_record_whose_main_score_is_not_among_its_metrics(tmp_path):
    from negharness.records.results import SCHEMA_VERSION
    from negharness.report.check import record_problems

    rec = {"schema_version": SCHEMA_VERSION, "created_at": "x", "model": {"fingerprint": "f"},
           "task": {"name": "t"}, "metrics": {"MedR": 3.0}, "main_score": {"name": "MdR", "value": None},
           "config_hash": "h"}
    assert "main score 'MdR' is not among the record's metrics (MedR)" in record_problems(tmp_path / "r.json", rec)
    rec["main_score"] = {"name": "MedR", "value": None}
    assert "main score 'MedR' is None, not its metric's value 3.0" in record_problems(tmp_path / "r.json", rec)
    rec["main_score"] = {"name": "MedR", "value": 3.0}
    assert not [p for p in record_problems(tmp_path / "r.json", rec) if "main score" in p]
