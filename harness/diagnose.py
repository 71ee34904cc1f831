"""`negharness diagnose`: NegBench's embedding diagnosis (Fig. 6, appendix B.2) for any model.

Captions from five template families over a set of objects (affirmation, negation, two-object
affirmation, hybrid, double negation) go through the model's text tower; PCA projects them to 2-D
(a PNG), and one number summarises the collapse: how much closer "X" sits to "not X" than to a
different object "Y". A model that understands negation keeps "X" and "not X" apart (gap < 0);
NegBench found CLIP models cluster by object and ignore the negation (gap > 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from pathlib import Path

import torch
import torch.nn.functional as F

from .errors import UserError

# The appendix's five examples per family, plus variants in the same spirit.
TEMPLATES = {
    "affirmation": ["This image includes {a}", "{A} is present in this image", "This image shows {a}",
                    "{A} is depicted in this image", "{A} appears in this image", "This image features {a}",
                    "There is {a} in this image", "This image contains {a}"],
    "negation": ["This image does not include {a}", "{A} is not present in this image", "This image lacks {a}",
                 "{A} is not depicted in this image", "{A} does not appear in this image",
                 "This image does not feature {a}", "There is no {o} in this image", "This image contains no {o}"],
    "two_objects": ["This image includes {a} and {b}", "{A} and {b} are present in this image",
                    "This image shows {a} and {b}", "{A} and {b} are depicted in this image",
                    "{A} and {b} appear in this image", "This image features {a} and {b}"],
    "hybrid": ["This image includes {a} but not {b}", "{A} is present in this image but not {b}",
               "This image shows {a} but not {b}", "This image features {a} but not {b}",
               "{A} appears in this image but not {b}", "There is {a} but no {p} in this image"],
    "double_negation": ["This image includes neither {a} nor {b}", "Neither {a} nor {b} are present in this image",
                        "This image shows neither {a} nor {b}", "Neither {a} nor {b} are depicted in this image",
                        "Neither {a} nor {b} appear in this image", "There is no {o} and no {p} in this image"],
}
DEFAULT_OBJECTS = ("dog", "cat", "car", "chair", "person", "bicycle", "pizza", "umbrella", "horse", "clock")


def _article(obj: str) -> str:
    return f"{'an' if obj[0] in 'aeiou' else 'a'} {obj}"


def captions(objects: list[str], pairs_per_object: int = 2) -> list[tuple[str, str, str]]:
    """(family, object, caption): single-object families per object, two-object ones per pair."""
    out = []
    for o in objects:
        a = _article(o)
        for fam in ("affirmation", "negation"):
            out += [(fam, o, t.format(a=a, A=a[0].upper() + a[1:], o=o)) for t in TEMPLATES[fam]]
    pairs = [(x, y) for x, y in permutations(objects, 2)]
    for x, y in pairs[:: max(1, len(pairs) // (pairs_per_object * len(objects)))]:
        a, b = _article(x), _article(y)
        for fam in ("two_objects", "hybrid", "double_negation"):
            out += [(fam, x, t.format(a=a, A=a[0].upper() + a[1:], b=b, o=x, p=y)) for t in TEMPLATES[fam]]
    return out


@dataclass
class Diagnosis:
    same_object_negation: float  # mean cos("X" affirmation, "not X" negation), same object
    different_objects: float  # mean cos("X" affirmation, "Y" affirmation), X != Y
    negation_gap: float  # the first minus the second: > 0 means negation collapses onto its object
    n_captions: int
    png: Path | None


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


def plot(emb: torch.Tensor, rows: list[tuple[str, str, str]], out: Path, title: str) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise UserError("diagnose needs matplotlib for the picture: pip install matplotlib") from exc
    x = F.normalize(emb.float(), dim=-1)
    x = x - x.mean(0, keepdim=True)
    _, _, v = torch.linalg.svd(x, full_matrices=False)
    xy = (x @ v[:2].t()).numpy()
    fig, ax = plt.subplots(figsize=(7, 6), dpi=120)
    for fam, colour in zip(TEMPLATES, ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange")):
        idx = [i for i, r in enumerate(rows) if r[0] == fam]
        ax.scatter(xy[idx, 0], xy[idx, 1], s=10, alpha=0.7, c=colour, label=fam.replace("_", " "))
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    from .atomic import atomic_write

    atomic_write(out, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)
    return out


def diagnose(model, objects: list[str], out: Path | None, batch_size: int = 256) -> Diagnosis:
    rows = captions(objects)
    with torch.inference_mode():
        emb = torch.cat([model.encode_text([r[2] for r in rows[i:i + batch_size]]).cpu()
                         for i in range(0, len(rows), batch_size)])
    same, diff = summarise(emb, rows)
    png = plot(emb, rows, out, f"{model.name}: negation gap {same - diff:+.3f}") if out else None
    return Diagnosis(same, diff, same - diff, len(rows), png)
