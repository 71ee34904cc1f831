"""SugarCrepe's seven published files and VALSE's existence.json, scored by negharness with stand-in
images and a deterministic model, against the authors' scorers re-implemented here from their code:
SugarCrepe's main_eval.py (``json.load`` per split, over ``data_dict.items()``: right when the
caption's score is strictly greater than the negative caption's; accuracy = right / count) and
VALSE's lxmert_valse_eval.py (items with ``mturk['caption'] >= 2`` only; pairwise accuracy: right
when the caption's score is strictly greater than the foil's). Every number and every row is
compared, and the counts are the files' (swap_obj.json holds 245 items).

The model embeds texts and images as 16 entries of +-1/4 (norm exactly 1), so every score is a
multiple of 1/8 computed exactly in any order of summation: ties are real ties, in both scorers."""

from __future__ import annotations

import hashlib
import json
import os
from importlib.resources import files
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest
import torch
from choice_helpers import evaluate
from conftest import SHARED

from negharness.api import EmbeddingModel
from negharness.declarative.register import load_folder
from negharness.scoring import perquery
from negharness.tasks.builtin import GENERATORS

SUGARCREPE = SHARED / "data" / "sugarcrepe"
VALSE = SHARED / "data" / "valse"
SPLITS = ("add_obj", "add_att", "replace_obj", "replace_att", "replace_rel", "swap_obj", "swap_att")
BUILTIN = {c.name: c for c in load_folder(Path(str(files("negharness.tasks.choice"))), GENERATORS)}
DIM, BLOCK = 16, 8  # a 32x32 stand-in image: 4x4 blocks of 8x8 pixels, one per embedding entry

needs_sugarcrepe = pytest.mark.needs("data/sugarcrepe/swap_obj.json")  # SugarCrepe's files; see SOURCE.md
needs_valse = pytest.mark.needs("data/valse/existence.json")  # VALSE's existence.json; see SOURCE.md


def _bits(text: str) -> np.ndarray:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return np.unpackbits(np.frombuffer(digest[:2], dtype=np.uint8))


class SignModel(EmbeddingModel):
    """A text: the signs of its SHA-256's first 16 bits, times 1/4. An image: black or white 8x8
    blocks read back as the signs, times 1/4. Deterministic, exact, and about 1 row in 5 a tie."""

    name = "sign16"
    modalities = frozenset({"text", "image"})

    def modules(self) -> list[torch.nn.Module]:
        return []  # no torch modules: nothing to move to a device

    def describe(self) -> dict[str, Any]:
        return {"arch": "sign16"}

    def preprocess_image(self, image: Any) -> torch.Tensor:
        arr = np.asarray(image.convert("L"), dtype=np.float32)
        blocks = arr.reshape(4, BLOCK, 4, BLOCK).mean((1, 3)).reshape(-1)
        return torch.from_numpy(blocks)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return torch.where(pixels > 127.5, 0.25, -0.25)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Whitespace-cleaned first, as CLIP's tokenizer does (``whitespace_clean(...).strip()``): the
        files' captions often end in a space, which main_eval passes on and negharness strips."""
        cleaned = [" ".join(t.split()) for t in texts]
        return torch.tensor(np.array([np.where(_bits(t) > 0, 0.25, -0.25) for t in cleaned]), dtype=torch.float32)


def _stand_in(path: Path) -> None:
    """A 32x32 JPEG whose 16 blocks are black or white by the hash of the file's name."""
    from PIL import Image

    bits = _bits(path.name).reshape(4, 4)
    arr = np.kron(bits * 255, np.ones((BLOCK, BLOCK))).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.stack([arr] * 3, -1)).save(path, quality=95)


def _link(root: Path, folder: str, source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The published files under the data root, by a link (never a copy): a data root assembled from
    links out of it is what ``NEGHARNESS_ALLOW_LINKS_OUT=1`` opts into."""
    monkeypatch.setenv("NEGHARNESS_ALLOW_LINKS_OUT", "1")
    root.mkdir(parents=True, exist_ok=True)
    os.symlink(source.resolve(), root / folder, target_is_directory=True)


def _score(model: SignModel, image_path: Path, texts: list[str]) -> list[float]:
    """As the authors' scripts do: encode, L2-normalise both sides, dot product."""
    from PIL import Image

    image = model.encode_image(model.preprocess_image(Image.open(image_path)).unsqueeze(0))
    text = model.encode_text(texts)
    image = image / image.norm(dim=-1, keepdim=True)
    text = text / text.norm(dim=-1, keepdim=True)
    return (text @ image.t()).squeeze(1).tolist()


def _sugarcrepe_authors(model: SignModel, data_root: Path, image_root: Path) -> dict[str, dict[str, Any]]:
    """main_eval.py's evaluate(): per split, correct_cnt / len(data_dict), and each item's 0/1."""
    out = {}
    for c in SPLITS:
        with open(data_root / f"{c}.json", encoding="utf-8") as fh:
            data_dict = json.load(fh)
        items = {}
        for i, data in data_dict.items():
            pos, neg = _score(model, image_root / data["filename"], [data["caption"], data["negative_caption"]])
            items[i] = 1 if pos > neg else 0
        out[c] = {"accuracy": sum(items.values()) / len(data_dict), "items": items, "ties": None}
    return out


@needs_sugarcrepe
def test_sugarcrepe_seven_files_score_as_main_eval(tmp_path, monkeypatch):
    root = tmp_path / "data"
    _link(root, "sugarcrepe", SUGARCREPE, monkeypatch)
    names = set()
    for c in SPLITS:
        names |= {d["filename"] for d in json.loads((SUGARCREPE / f"{c}.json").read_text()).values()}
    for name in names:
        _stand_in(root / "coco/val2017" / name)
    model = SignModel()
    authors = _sugarcrepe_authors(model, SUGARCREPE, root / "coco/val2017")
    sizes = {c: len(json.loads((SUGARCREPE / f"{c}.json").read_text())) for c in SPLITS}
    same: dict[str, int] = {}
    assert sizes["swap_obj"] == 245  # the paper says 246: key "108" is absent from the file
    for c in SPLITS:
        res = evaluate(BUILTIN[f"sugarcrepe_{c}"], root, model)
        assert res.n_items["rows"] == sizes[c] and "rows_identical" not in res.n_items and "filtered" not in res.notes
        assert res.metrics["accuracy"] == pytest.approx(authors[c]["accuracy"] * 100, abs=1e-9), c
        # row by row: the sample's key is the file's id, as main_eval iterates it
        mine = {s["row"].rsplit("item ", 1)[1].strip("'"): int(s["chosen"] == s["correct"] and not s["tie"])
                for s in res.samples}
        assert mine == authors[c]["items"], c
        ties = sum(s["tie"] for s in res.samples)
        assert 0 < ties < sizes[c] and 0 < sum(mine.values()) < sizes[c] - ties  # right, wrong and tied rows
        assert res.metrics["tie_rate"] == pytest.approx(ties / sizes[c] * 100, abs=1e-9)
        assert perquery.problems(res.per_query, res.metrics) == []
        assert len(res.per_query["ids"]) == sizes[c]
        same[c] = res.notes["same_words"]["rows"]
        assert res.metrics["order_blind_ceiling"] == pytest.approx(100 - same[c] / sizes[c] * 100, abs=1e-9)
    # the swap splits' negatives are their captions' words in another order: 572 of 7,511 pairs
    assert sum(same.values()) == 572 and {c for c in SPLITS if same[c]} == {"swap_att", "swap_obj"}
    suite = evaluate(BUILTIN["sugarcrepe_mean"], root, model)
    assert suite.metrics["mean"] == pytest.approx(np.mean([authors[c]["accuracy"] * 100 for c in SPLITS]), abs=1e-9)
    assert {suite.n_items[f"{c}_rows"] for c in SPLITS} == set(sizes.values())
    assert perquery.problems(suite.per_query, suite.metrics) == []


def _valse_authors(model: SignModel, path: Path, image_root: Path) -> dict[str, Any]:
    """lxmert_valse_eval.py: valid items (mturk caption >= 2) only; pairwise_acc / count * 100."""
    with open(path) as fh:
        foils_data = json.load(fh)
    count, pairwise_acc, items = 0, 0, {}
    for foil_id, foil in foils_data.items():
        if foil["mturk"]["caption"] >= 2:
            count += 1
            caption, foiled = _score(model, image_root / foil["image_file"], [foil["caption"], foil["foil"]])
            items[foil_id] = int(caption > foiled)
            pairwise_acc += items[foil_id]
    return {"count": count, "total": len(foils_data), "acc_r": pairwise_acc / count * 100, "items": items}


@needs_valse
def test_valse_existence_scores_as_the_authors_eval(tmp_path, monkeypatch):
    root = tmp_path / "data"
    _link(root, "valse", VALSE, monkeypatch)
    data = json.loads((VALSE / "existence.json").read_text())
    for item in data.values():
        _stand_in(root / "visual7w/images" / item["image_file"])
    model = SignModel()
    authors = _valse_authors(model, VALSE / "existence.json", root / "visual7w/images")
    assert (authors["count"], authors["total"]) == (505, 534)
    res = evaluate(BUILTIN["valse_existence"], root, model)
    assert res.n_items["rows"] == 505 and res.n_items["rows_filtered"] == 29
    [dropped] = res.notes["filtered"]
    assert dropped["rows"] == 29 and dropped["filter"] == "mturk.caption >= 2" and "valid set" in dropped["reason"]
    assert res.metrics["accuracy"] == pytest.approx(authors["acc_r"], abs=1e-9)
    mine = {s["row"].rsplit("item ", 1)[1].strip("'"): int(s["chosen"] == s["correct"] and not s["tie"])
            for s in res.samples}
    assert mine == authors["items"]
    ties = sum(s["tie"] for s in res.samples)
    assert 0 < ties and 0 < sum(mine.values()) < 505 - ties
    assert perquery.problems(res.per_query, res.metrics) == []
    # the item whose foil equals its caption ("There are 4.") has no valid votes: filtered before it could tie
    assert "rows_identical" not in res.n_items
