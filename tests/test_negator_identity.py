"""What the negator made is kept under its identity (`builder_identity`: the rules' version and the versions of
the libraries they read): the soft negatives memoised for training, a training set's digest (what a resumed run
compares) and the nT2VR query files' build mark all see new rules or a library upgrade; unchanged, the memo is
read back, not rebuilt."""

from __future__ import annotations

import numpy as np
import pytest

import negharness.text.build_queries as build_queries
import negharness.world.tagger  # noqa: F401 - the world's closed tagger: world captions need no NLTK data
from negharness.api import TrainSetOptions
from negharness.tasks.nt2vr import training as nt2vr_training
from negharness.tasks.shapes import training as shapes_training
from negharness.text.built_marker import stale_reason
from negharness.world.media import WorldData
from negharness.world.scenes import video_caption_forms


class _Negation:
    text, rule = "NEW RULES OUTPUT", "verb"


def _world() -> WorldData:
    """Two of the world's own captions (its closed tagger knows them: no NLTK data needed)."""
    captions = [next(iter(video_caption_forms([("a red circle", "sliding")])))]
    captions.append(next(iter(video_caption_forms([("a blue square", "bouncing")]))))
    return WorldData(["v0", "v1"], [[c] for c in captions], ["a", "b"], np.zeros((2, 1, 32, 32, 3), np.uint8))


def test_builder_identity_names_the_rules_and_the_libraries_they_read(monkeypatch):
    build_queries.builder_identity.cache_clear()
    now = build_queries.builder_identity()
    assert now.startswith(build_queries.BUILDER_VERSION + "+") and "lemminflect" in now and "nltk" in now
    monkeypatch.setattr(build_queries, "installed_version", lambda name: "9.9" if name == "lemminflect" else "1.0")
    build_queries.builder_identity.cache_clear()
    try:
        assert build_queries.builder_identity() == f"{build_queries.BUILDER_VERSION}+lemminflect9.9+nltk1.0" != now
    finally:
        build_queries.builder_identity.cache_clear()


def test_soft_negatives_are_rebuilt_for_another_negator_and_read_back_for_the_same(tmp_path, monkeypatch):
    first = shapes_training._soft_negatives(_world(), tmp_path, 0, "train", "video")
    assert first[0][0] is not None and ("n't" in first[0][0] or "not" in first[0][0])
    monkeypatch.setattr(shapes_training, "negate", lambda caption, seed=0: iter([_Negation()]))
    assert shapes_training._soft_negatives(_world(), tmp_path, 0, "train", "video") == first  # same negator: the memo
    monkeypatch.setattr(shapes_training, "builder_identity", lambda: "5+lemminflect0+nltk0")  # new rules
    assert shapes_training._soft_negatives(_world(), tmp_path, 0, "train", "video") == [["NEW RULES OUTPUT"]] * 2


def test_training_set_digests_change_with_the_negator(tmp_path, monkeypatch):
    options = TrainSetOptions(tmp_path, {"n_train": "2", "n_val": "1"})
    before = shapes_training.shapes(options).data_hash
    assert shapes_training.shapes(options).data_hash == before
    monkeypatch.setattr(shapes_training, "builder_identity", lambda: "5+lemminflect0+nltk0")
    assert shapes_training.shapes(options).data_hash != before
    files = "0123456789abcdef"
    assert nt2vr_training.with_negator(files, False) == files  # the authors' negation file: no negator in the set
    mine = nt2vr_training.with_negator(files, True)
    monkeypatch.setattr(nt2vr_training, "builder_identity", lambda: "5+lemminflect0+nltk0")
    assert nt2vr_training.with_negator(files, True) not in (mine, files)


@pytest.mark.parametrize("version", ["4", "4+lemminflect0.0.1+nltk3.0"])
def test_query_files_built_by_another_negator_are_stale(version):
    rows = [("video0#enc#0", "a man is dancing")]
    from negharness.text.built_marker import BUILDER, captions_hash

    mark = {"builder": BUILDER, "builder_version": version, "complete": True, "captions_sha256": captions_hash(rows)}
    assert "builder version" in str(stale_reason(mark, build_queries.builder_identity(), rows))
    assert stale_reason({**mark, "builder_version": build_queries.builder_identity()},
                        build_queries.builder_identity(), rows) is None
