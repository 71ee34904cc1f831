"""`negharness diagnose`: NegBench's embedding diagnosis (Fig. 6, appendix B.2) for any model.

Captions from the paper's five template families (24/24/23/24/24 templates, data in
``diagnose_templates.yaml``) over a set of objects (affirmation, negation, two-object
affirmation, hybrid, double negation) go through the model's text tower; PCA projects them to 2-D
(a PNG), and one number summarises the collapse: how much closer "X" sits to "not X" than to a
different object "Y". A model that understands negation keeps "X" and "not X" apart (gap < 0);
NegBench found CLIP models cluster by object and ignore the negation (gap > 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import permutations
from pathlib import Path
from typing import Protocol, Sequence

import torch
import torch.nn.functional as F

from negharness.contracts.errors import UserError
from negharness.io.atomic_files import atomic_write

TEMPLATE_FILE = Path(__file__).with_name("diagnose_templates.yaml")
FAMILIES = ("affirmation", "negation", "two_objects", "hybrid", "double_negation")
SINGLE = ("affirmation", "negation")  # over one object (A); the other families over a pair (A, B)
DEFAULT_OBJECTS = ("dog", "cat", "car", "chair", "person", "bicycle", "pizza", "umbrella", "horse", "clock")
# A model trained on a closed vocabulary (the embedded world's shapes_clip) names its own objects in
# this attribute, set by its plugin; the host reads it without knowing where the words come from.
OBJECT_WORDS_ATTR = "object_words"


def default_objects(model: object) -> tuple[list[str], str]:
    """The objects to diagnose ``model`` on when the user names none, and where they come from: the
    words its plugin declares (``model.object_words``), else NegBench's COCO objects. A model that
    never saw "dog" would place every caption by its unknown tokens, not by its understanding."""
    words = getattr(model, OBJECT_WORDS_ATTR, None)
    if words:
        found = [str(w).strip() for w in words if str(w).strip()]
        if len(found) >= 2:
            return found, "the model's own object words"
    return list(DEFAULT_OBJECTS), "ten COCO objects"


@dataclass(frozen=True)
class TemplateFamily:
    name: str
    label: str
    paper: tuple[str, ...]  # the examples appendix B.2 prints, verbatim
    added: tuple[str, ...]  # negharness's completion to the paper's count (the full sets are unpublished)

    @property
    def templates(self) -> tuple[str, ...]:
        return self.paper + self.added


def load_templates(path: Path = TEMPLATE_FILE) -> dict[str, TemplateFamily]:
    """The five families, checked: the size the paper gives, no duplicates, the placeholders each needs."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{path}: cannot read the diagnosis templates ({exc})") from exc
    out = {}
    for name in FAMILIES:
        spec = (data or {}).get(name)
        if not isinstance(spec, dict):
            raise UserError(f"{path}: no template family {name!r}")
        fam = TemplateFamily(name, str(spec.get("label", name)), tuple(spec.get("paper") or ()), tuple(spec.get("added") or ()))
        if len(fam.templates) != spec.get("count") or len(set(fam.templates)) != len(fam.templates):
            raise UserError(f"{path}: family {name!r} has {len(set(fam.templates))} distinct templates, "
                            f"count says {spec.get('count')}")
        wanted = (1, 0) if name in SINGLE else (1, 1)
        for t in fam.templates:
            if (len(re.findall(r"\bA\b", t)), len(re.findall(r"\bB\b", t))) != wanted:
                raise UserError(f"{path}: template {t!r} ({name}) must name A{' and B' if wanted[1] else ''} once each")
        out[name] = fam
    return out


TEMPLATES = {name: fam.templates for name, fam in load_templates().items()}


def fill(template: str, a: str, b: str = "") -> str:
    """A and B replaced by the object names (bare nouns, as NegBench's templates), first letter capitalised."""
    text = re.sub(r"\b[AB]\b", lambda m: a if m.group() == "A" else b, template)
    return text[:1].upper() + text[1:]


def captions(objects: list[str], pairs_per_object: int = 2) -> list[tuple[str, str, str]]:
    """(family, object, caption): single-object families per object, two-object ones per pair."""
    out = []
    for o in objects:
        for fam in SINGLE:
            out += [(fam, o, fill(t, o)) for t in TEMPLATES[fam]]
    pairs = [(x, y) for x, y in permutations(objects, 2)]
    for x, y in pairs[:: max(1, len(pairs) // (pairs_per_object * len(objects)))]:
        for fam in FAMILIES[2:]:
            out += [(fam, x, fill(t, x, y)) for t in TEMPLATES[fam]]
    return out


@dataclass
class Diagnosis:
    same_object_negation: float  # mean cos("X" affirmation, "not X" negation), same object
    different_objects: float  # mean cos("X" affirmation, "Y" affirmation), X != Y
    negation_gap: float  # the first minus the second: > 0 means negation collapses onto its object
    n_captions: int
    png: Path | None
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # (family, object, caption)
    xy: list[tuple[float, float]] = field(default_factory=list)  # each caption's PCA coordinates
    explained: tuple[float, float] = (0.0, 0.0)  # share of the variance PC 1 and PC 2 explain

    def summary(self) -> dict[str, float]:
        return {"same_object_negation": self.same_object_negation, "different_objects": self.different_objects,
                "negation_gap": self.negation_gap}


def summarise(emb: torch.Tensor, rows: list[tuple[str, str, str]]) -> tuple[float, float]:
    emb = F.normalize(emb.float(), dim=-1)
    fam = [r[0] for r in rows]
    obj = [r[1] for r in rows]
    aff = [i for i, f in enumerate(fam) if f == "affirmation"]
    neg = [i for i, f in enumerate(fam) if f == "negation"]
    sim = emb @ emb.t()
    same = [float(sim[i, j]) for i in aff for j in neg if obj[i] == obj[j]]
    diff = [float(sim[i, j]) for i in aff for j in aff if obj[i] != obj[j]]
    return sum(same) / len(same), sum(diff) / len(diff)


def pca_2d(emb: torch.Tensor) -> tuple[list[tuple[float, float]], tuple[float, float]]:
    """Each caption's coordinates on the first two principal components of the normalised
    embeddings, and the share of the total variance each explains (NegBench Fig. 6's axes)."""
    x = F.normalize(emb.float(), dim=-1)
    x = x - x.mean(0, keepdim=True)
    _, s, v = torch.linalg.svd(x, full_matrices=False)
    axes = v[:2]
    # an SVD axis has no sign: fix it (largest loading positive) so another LAPACK draws the same picture
    pick = axes.abs().argmax(dim=1)
    axes = axes * torch.sign(axes[torch.arange(2), pick]).unsqueeze(1)
    xy = (x @ axes.t()).tolist()
    var = s.double() ** 2
    total = float(var.sum())
    ratio = (float(var[0]) / total, float(var[1]) / total) if total > 0 else (0.0, 0.0)
    return [(float(a), float(b)) for a, b in xy], ratio


def plot(xy: list[tuple[float, float]], explained: tuple[float, float], rows: list[tuple[str, str, str]],
         out: Path, title: str) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise UserError("diagnose needs matplotlib for the picture: pip install matplotlib") from exc
    fig, ax = plt.subplots(figsize=(7, 6), dpi=120)
    for fam, colour in zip(TEMPLATES, ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange")):
        idx = [i for i, r in enumerate(rows) if r[0] == fam]
        ax.scatter([xy[i][0] for i in idx], [xy[i][1] for i in idx], s=10, alpha=0.7, c=colour, label=fam.replace("_", " "))
    ax.set_xlabel(f"PC 1 ({100 * explained[0]:.1f}% of variance)")
    ax.set_ylabel(f"PC 2 ({100 * explained[1]:.1f}% of variance)")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)

    atomic_write(out, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)
    return out


class TextTower(Protocol):
    """What the diagnosis asks of a model: its name and its text encoder (an `EmbeddingModel` has both)."""

    name: str

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor: ...


def diagnose(model: TextTower, objects: list[str], out: Path | None, batch_size: int = 256) -> Diagnosis:
    rows = captions(objects)
    with torch.inference_mode():
        emb = torch.cat([model.encode_text([r[2] for r in rows[i:i + batch_size]]).cpu()
                         for i in range(0, len(rows), batch_size)])
    same, diff = summarise(emb, rows)
    xy, explained = pca_2d(emb)
    png = plot(xy, explained, rows, out, f"{model.name}: negation gap {same - diff:+.3f}") if out else None
    return Diagnosis(same, diff, same - diff, len(rows), png, rows, xy, explained)
