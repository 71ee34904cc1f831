"""The world tags its own captions: NLTK's tags exactly, with no NLTK data, for every option of
every world task and training set; any other text still goes to NLTK (or one clear error offline)."""

from __future__ import annotations

import random

import pytest

from negharness.api import UserError
from negharness.text import nltk_resources
from negharness.world.tagger import windows, world_captions, world_tags


@pytest.fixture
def no_nltk(monkeypatch):
    """NLTK's data as absent as on a fresh offline machine: any use of it is the offline error."""
    def missing() -> None:
        raise UserError("NLTK data missing and could not be downloaded (offline?)")

    monkeypatch.setattr(nltk_resources, "ensure_nltk", missing)


def test_the_language_is_closed_and_every_caption_is_tagged():
    captions = list(world_captions())
    assert len(captions) == 71_208  # 24 noun phrases x 4 actions: 1-2 objects x 3 wordings; images 1-3 x 3
    assert all(world_tags(nltk_resources.tokenize(c)) is not None for c in captions[::97])
    assert world_tags(nltk_resources.tokenize("a man is riding a horse")) is None  # not the world's


@pytest.mark.needs("nltk")
def test_table_equals_nltk_on_a_sample():
    import nltk

    captions = list(world_captions())
    for caption in random.Random(20261124).sample(captions, 1500):
        tokens = nltk.word_tokenize(caption)
        assert nltk_resources.tokenize(caption) == tokens
        assert world_tags(tokens) == [t for _, t in nltk.pos_tag(tokens)], caption


@pytest.mark.needs("nltk")
def test_window_table_is_what_a_build_here_makes():
    """The shipped table is what `python -m negharness.world.queries` would write here. Where the hash of what
    its build read (captions, window rule, tokenizing and tagging code, NLTK's release and data) equals the one
    written beside it, that settles it in a second; where an input differs (a new NLTK release in CI, say) the
    table is rebuilt (~40 s of NLTK tagging) and must equal the shipped one. Either way the table must be the
    file its build wrote."""
    from negharness.world.tagger import _table, build_inputs, build_table, built_from, table_sha

    stamp = built_from()
    assert stamp["table"] == table_sha(), "pos_tags.json was edited after its build: run python -m negharness.world.queries"
    if stamp["inputs"] != build_inputs():
        assert build_table() == _table(), "NLTK tags the world's captions otherwise now: run python -m negharness.world.queries"


@pytest.mark.needs("nltk")
def test_the_tables_build_inputs_change_with_each_input(monkeypatch, tmp_path):
    """Each thing the table's build reads changes the hash: a caption more, the window, NLTK's release, a byte
    of its tagger data, the tokenizer's code."""
    import nltk

    from negharness.world import tagger

    base = tagger.build_inputs()
    changed = []
    with monkeypatch.context() as m:
        m.setattr(tagger, "world_captions", lambda real=tagger.world_captions: iter([*real(), "a red circle"]))
        changed.append(tagger.build_inputs())
    with monkeypatch.context() as m:
        m.setattr(tagger, "WINDOW", 3)
        changed.append(tagger.build_inputs())
    with monkeypatch.context() as m:
        m.setattr(nltk, "__version__", "0.0")
        changed.append(tagger.build_inputs())
    with monkeypatch.context() as m:
        real = tagger.nltk_data_files

        def one_byte_off(path: str):
            for i, (name, data) in enumerate(real(path)):
                yield name, (data[:-1] + bytes([data[-1] ^ 1]) if i == 0 and "tagger" in path else data)

        m.setattr(tagger, "nltk_data_files", one_byte_off)
        changed.append(tagger.build_inputs())
    with monkeypatch.context() as m:
        def tokenize(text: str) -> list[str]:  # another tokenizer's code
            return text.split()

        m.setattr(tagger, "tokenize", tokenize)
        changed.append(tagger.build_inputs())
    assert len({base, *changed}) == 6


def test_non_default_world_queries_build_without_nltk(no_nltk, tmp_path):
    from negharness.world.queries import build_world_queries

    built = build_world_queries(3, "test", 40, tmp_path, query_seed=1)
    assert built["negated"] and built["composed"]
    assert all(" not " in n[1] or "n't" in n[1] for n in built["negated"])


def test_world_queries_built_here_are_kept_under_the_builders_identity(tmp_path, monkeypatch):
    """A non-default split's query sets, kept under the data root, were named by the rules' version alone: a
    lemminflect or NLTK upgrade (`builder_identity`) read the old build. Now their name holds the identity."""
    from negharness.world import queries

    builds: list[int] = []
    real = queries.build_world_queries

    def counted(*args, **kwargs):
        builds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(queries, "build_world_queries", counted)
    for identity in ("4+lemminflect1+nltk1", "4+lemminflect1+nltk1", "4+lemminflect2+nltk1"):
        monkeypatch.setattr(queries, "builder_identity", lambda identity=identity: identity)
        queries.load_world_queries.cache_clear()
        queries.load_world_queries(3, "test", 20, tmp_path, 1)
    assert len(builds) == 2  # built, read back, built again under the new identity
    assert len(list((tmp_path / "shapes_world").glob("*.queries-*.json"))) == 2


@pytest.mark.needs("nltk")
def test_world_queries_equal_an_nltk_build(tmp_path, monkeypatch):
    from negharness.world.queries import build_world_queries

    ours = build_world_queries(5, "val", 60, tmp_path, query_seed=2)
    monkeypatch.setattr(nltk_resources, "_CLOSED_TAGGERS", [])
    assert build_world_queries(5, "val", 60, tmp_path, query_seed=2) == ours


def test_other_text_still_needs_nltk(no_nltk):
    with pytest.raises(UserError, match="NLTK data missing"):
        nltk_resources.tag("A man rides a horse.")


def test_windows_pad_both_ends():
    assert windows(["a", "red"]) == ["<s> <s> a red </s>", "<s> a red </s> </s>"]


def test_offline_nltk_fetch_is_one_error_and_no_downloader_lines(monkeypatch, capsys):
    """NLTK's downloader prints '[nltk_data] Error loading ...' even when quiet: none of it reaches
    the terminal, only the one error."""
    import nltk

    def offline_download(name, quiet=False, raise_on_error=False, print_error_to=None, **_):
        print(f"[nltk_data] Error loading {name}: <urlopen error>", file=print_error_to)
        raise ValueError("offline")

    monkeypatch.setattr(nltk.data, "find", lambda path: (_ for _ in ()).throw(LookupError(path)))
    monkeypatch.setattr(nltk, "download", offline_download)
    nltk_resources.ensure_nltk.cache_clear()
    with pytest.raises(UserError, match="NLTK data missing"):
        nltk_resources.ensure_nltk()
    nltk_resources.ensure_nltk.cache_clear()
    captured = capsys.readouterr()
    assert "[nltk_data]" not in captured.out + captured.err
