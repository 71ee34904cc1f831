"""The diagnosis templates: NegBench appendix B.2's families, sizes and printed examples."""

import re
from pathlib import Path

import pytest
from conftest import SHARED  # noqa: E402

from negharness.api import UserError
from negharness.report.diagnose import (
    FAMILIES,
    TEMPLATES,
    captions,
    fill,
    load_templates,
)

PAPER = SHARED / "seeds" / "003_8a649d9afd753fc6.txt"


def test_family_sizes_are_the_papers():
    # "Each category contains 24 templates, except for Affirmation (two objects) which has 23."
    assert {f: len(t) for f, t in TEMPLATES.items()} == {
        "affirmation": 24, "negation": 24, "two_objects": 23, "hybrid": 24, "double_negation": 24}
    assert all(len(set(t)) == len(t) for t in TEMPLATES.values())


def test_the_papers_examples_come_first_verbatim():
    fams = load_templates()
    assert fams["affirmation"].paper[:2] == ("This image includes A", "A is present in this image")
    assert fams["negation"].paper[2] == "This image lacks A"
    assert fams["two_objects"].paper[4] == "A and B appear in this image"
    assert fams["hybrid"].paper[1] == "A is present in this image but not B"
    assert fams["double_negation"].paper[1] == "Neither A nor B are present in this image"
    assert all(len(f.paper) == 5 for f in fams.values())


@pytest.mark.needs("seeds/003_8a649d9afd753fc6.txt")  # the NegBench paper text
def test_examples_equal_the_appendix_text():
    """Every family's `paper` list is exactly the examples printed in appendix B.2, in order."""
    text = PAPER.read_text(encoding="utf-8")
    labels = {"affirmation": "Affirmation (single object)", "negation": "Negation (single object)",
              "two_objects": "Affirmation (two objects)", "hybrid": "Hybrid (one object affirmed, one negated)",
              "double_negation": "Double Negation (two objects negated)"}
    fams = load_templates()
    for name, label in labels.items():
        line = next(ln for ln in text.splitlines() if ln.startswith(f"{label}: "))
        assert int(re.search(r": (\d+) templates", line).group(1)) == len(fams[name].templates)
        printed = re.findall(r"”([^”]+)”", line.split("Examples:", 1)[1])
        assert tuple(printed) == fams[name].paper, name
        assert fams[name].label == label


def test_captions_fill_bare_object_names():
    assert fill("A is present in this image but not B", "dog", "cat") == "Dog is present in this image but not cat"
    assert fill("This image includes neither A nor B", "B cell", "Apple") == "This image includes neither B cell nor Apple"
    rows = captions(["dog", "cat", "car"])
    per = {f: sum(1 for r in rows if r[0] == f) for f in FAMILIES}
    pairs = len({(r[1], r[2].split()[-1]) for r in rows if r[0] == "two_objects"})
    assert per["affirmation"] == per["negation"] == 3 * 24  # 48 captions per object, as section 4.1 says
    assert per["two_objects"] == 23 * (per["hybrid"] // 24) and per["hybrid"] == per["double_negation"]
    assert ("affirmation", "dog", "This image includes dog") in rows
    assert pairs >= 1


def test_a_broken_template_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "t.yaml"
    bad.write_text(Path(load_templates.__defaults__[0]).read_text().replace("count: 23", "count: 24"))
    with pytest.raises(UserError, match=r"t.yaml: family 'two_objects' has 23 distinct templates, count says 24"):
        load_templates(bad)
    bad.write_text(Path(load_templates.__defaults__[0]).read_text().replace("- This image lacks A\n", "- This image lacks it\n"))
    with pytest.raises(UserError, match=r"template 'This image lacks it' \(negation\) must name A"):
        load_templates(bad)


def test_pca_axes_have_a_fixed_sign():
    """An SVD axis has no sign; the picture must not flip with the LAPACK build or the order of the
    embedding's dimensions: the largest loading of each axis is made positive."""
    import torch

    from negharness.report.diagnose import pca_2d

    torch.manual_seed(0)
    emb = torch.randn(40, 16) @ torch.diag(torch.linspace(3, 0.5, 16))
    xy, ratio = pca_2d(emb)
    for perm in (torch.randperm(16), torch.arange(15, -1, -1)):
        xy2, ratio2 = pca_2d(emb[:, perm])
        assert torch.allclose(torch.tensor(xy), torch.tensor(xy2), atol=1e-5)
        assert abs(ratio[0] - ratio2[0]) < 1e-5  # float32 SVD
    flipped, _ = pca_2d(-emb)  # the same cloud mirrored: coordinates mirror too (axes keep their sign rule)
    assert torch.allclose(torch.tensor(flipped), -torch.tensor(xy), atol=1e-5)
