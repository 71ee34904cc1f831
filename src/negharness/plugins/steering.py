"""Steering as a model wrapper: ``--model steer -M base=clip`` (Sammani et al., arXiv 2603.20554).

The base model's text tower runs with the end-of-text (EOT) activation of every layer steered toward
negation; images are the base model's. Transcribed from github.com/fawazsammani/negation-steering at
10011d97, ``steer.py``: a forward hook on each block of the text transformer (``resblocks``, the
residual stream after the block, before ``ln_final``; steer.py:210-215) replaces, at each row's EOT
position only (the token the tower pools, ``argmax`` of the token ids for CLIP; steer.py:192-202), the
activation x by

    (1 - alpha) x + alpha d |x|                                            (steer.py:175-177)

with d that layer's unit direction (`negharness.plugins.steering_fit`), |x| the L2 norm of x, and
alpha = 0.13 (steer.py:426). Each block's input is the previous block's steered output, as the
authors' hooks run in one forward pass. The directions are fitted once per (base model, pairs file
content, fit settings) on the unsteered activations and kept under ``<cache>/steering/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from negharness.api import ModelOptions, UserError
from negharness.api.files import cache_root
from negharness.plugins import options as declared
from negharness.plugins.openclip_model import OpenClipModel
from negharness.plugins.steering_fit import (
    Pairs,
    authors_pairs_path,
    cache_key,
    cache_path,
    fit_directions,
    fit_settings,
    fitted_rows,
    load_directions,
    read_pairs,
    save_directions,
)
from negharness.plugins.token_lengths import pool_positions
from negharness.plugins.wrapped_model import WrappedModel

FIT_BATCH = 256  # captions a forward pass while collecting activations


Edit = Callable[[int, torch.Tensor], "torch.Tensor | None"]


def steered(x: torch.Tensor, direction: torch.Tensor, alpha: float) -> torch.Tensor:
    """(1 - alpha) x + alpha d |x| per row (steer.py:176), in float32 whatever the tower's dtype."""
    x = x.float()
    out: torch.Tensor = (1 - alpha) * x + alpha * direction.to(x.device) * torch.linalg.norm(x, dim=-1, keepdim=True)
    return out


class EotHooks:
    """While entered, each text block's output at each row's pooled (EOT) position goes through
    ``edit(layer, eot)``, which returns its replacement (or None: unchanged). The tokens of each forward
    pass are read off the token embedding, so a batch cut to its token lengths is steered at its own
    positions; the layout (batch- or sequence-first) is read at each call (`sequence_first` switches it)."""

    def __init__(self, model: torch.nn.Module, edit: Edit) -> None:
        self.model: Any = model  # an open_clip CLIP (`check_steerable`): token_embedding, transformer.resblocks
        self.edit = edit
        self.positions: torch.Tensor | None = None
        self.handles: list[Any] = []

    def __enter__(self) -> "EotHooks":
        self.handles.append(self.model.token_embedding.register_forward_hook(self._tokens))
        for layer, block in enumerate(self.model.transformer.resblocks):
            self.handles.append(block.register_forward_hook(self._block(layer)))
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def _tokens(self, module: torch.nn.Module, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        self.positions = pool_positions(inputs[0], self.model.text_pool_type, getattr(self.model, "text_eos_id", None))

    def _block(self, layer: int) -> Callable[..., torch.Tensor | None]:
        def hook(module: torch.nn.Module, inputs: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor | None:
            assert self.positions is not None, "text blocks ran before the token embedding"
            first = bool(self.model.transformer.batch_first)
            pos = self.positions.to(output.device)
            rows = torch.arange(len(pos), device=output.device)
            new = self.edit(layer, output[rows, pos] if first else output[pos, rows])
            if new is None:
                return None
            out = output.clone()
            if first:
                out[rows, pos] = new.to(out.dtype)
            else:
                out[pos, rows] = new.to(out.dtype)
            return out
        return hook


def check_steerable(base: Any, base_name: str) -> None:
    """Only an open_clip CLIP whose text tower is a transformer pooled at one token can be steered."""
    import open_clip

    model = getattr(base, "model", None)
    if (not isinstance(base, OpenClipModel) or not isinstance(model, open_clip.model.CLIP)
            or not hasattr(getattr(model, "transformer", None), "resblocks")
            or getattr(model, "text_pool_type", None) not in ("argmax", "eos")):
        raise UserError(f"-M base={base_name}: model steer steers the text transformer of an open_clip CLIP pooled "
                        f"at its end-of-text token (clip, negclip, shapes_clip, ...); {base_name} is not one")


class SteerModel(WrappedModel):
    """The base model with its text steered (module docstring); images, videos and preprocessing as the base."""

    base: OpenClipModel

    def __init__(self, base: OpenClipModel, base_name: str, alpha: float, pairs: Pairs, holdout: int,
                 cache: Path) -> None:
        super().__init__(base, f"steer({base_name})")
        self.alpha, self.pairs, self.holdout, self.cache = alpha, pairs, holdout, cache
        self._fitted: tuple[torch.Tensor, list[float | None]] | None = None

    def describe(self) -> dict[str, Any]:
        return {"base": self.base.describe(), "steering": {
            "alpha": self.alpha, "pairs_sha256": self.pairs.sha256, "fit": fit_settings(self.holdout),
            "where": "every text block's output at the pooled (end-of-text) token"}}

    # directions -----------------------------------------------------------------------------
    def directions(self) -> torch.Tensor:
        """(layers, width) unit directions: from the cache when fitted before, else fitted and cached."""
        if self._fitted is None:
            model: Any = self.base.model
            key = cache_key(self.base.fingerprint(), self.pairs.sha256, self.holdout)
            path = cache_path(self.cache, key)
            shape = (len(model.transformer.resblocks), int(model.transformer.width))
            self._fitted = load_directions(path, key, shape)
            if self._fitted is None:
                self._fitted = fit_directions(self.activations(self.pairs.positives),
                                              self.activations(self.pairs.negated), self.holdout)
                save_directions(path, key, *self._fitted, {"model": self.name, "pairs": str(self.pairs.path),
                                                           "pairs_sha256": self.pairs.sha256})
        return self._fitted[0]

    def activations(self, texts: Sequence[str]) -> list[torch.Tensor]:
        """Per layer, (N, width) unsteered EOT activations of ``texts``, in float32 (no autocast: the
        directions do not depend on the run's precision)."""
        model: Any = self.base.model
        grabbed: list[list[torch.Tensor]] = [[] for _ in model.transformer.resblocks]

        def grab(layer: int, eot: torch.Tensor) -> None:
            grabbed[layer].append(eot.detach().float().cpu())

        with torch.no_grad(), torch.autocast(self.device.type, enabled=False), EotHooks(model, grab):
            for lo in range(0, len(texts), FIT_BATCH):
                model.encode_text(self.base.prepare_texts(texts[lo:lo + FIT_BATCH]).to(self.device))
        return [torch.cat(layer) for layer in grabbed]

    # EmbeddingModel: what steering changes (the rest is the base's, `WrappedModel`) ------------
    def encode_prepared(self, tokens: torch.Tensor) -> torch.Tensor:
        """The base's encoding of ``tokens`` with every layer's EOT activation steered."""
        d = self.directions()  # before the hooks: fitting runs the tower unsteered
        with EotHooks(self.base.model, lambda layer, eot: steered(eot, d[layer], self.alpha)):
            return self.base.encode_prepared(tokens)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        return self.encode_prepared(self.prepare_texts(texts))

    def scoring_notes(self, texts: Sequence[str], parts: Sequence[tuple[str, str] | None] | None = None
                      ) -> dict[str, Any]:
        """The pairs fitted on and each layer's accuracy on the held-out pairs (steer.py:89-91)."""
        self.directions()
        assert self._fitted is not None
        n = len(self.pairs.positives)
        return {"steer": {"pairs": n, "fitted_on": n - self.holdout, "held_out_accuracy": self._fitted[1]}}


@declared.STEER
def steer(options: ModelOptions) -> SteerModel:
    """``-M base=NAME``: the open_clip model to steer; every other option goes to it (unparsed: the base checks it)."""
    base_name = options.values["base"]
    if not base_name:
        raise UserError("model steer needs -M base=MODEL (an open_clip model to steer, e.g. -M base=clip)")
    if base_name == "steer":
        raise UserError("-M base=steer: the wrapper cannot wrap itself")
    given = options.values["pairs"]
    pairs = read_pairs(Path(given).expanduser()) if given else read_pairs(authors_pairs_path(), default=True)
    holdout = options.values["holdout"]
    fitted_rows(len(pairs.positives), holdout)  # refused before the base model loads
    base = options.lookup().plugin("model", base_name,
                                   ModelOptions(options.arch, options.pretrained, options.checkpoint, dict(options.rest)))
    check_steerable(base, base_name)
    cache = cache_root(getattr(options.plugins, "cache_dir", None))  # the run's --cache-dir (`PluginLookup`)
    return SteerModel(base, base_name, float(options.values["alpha"]), pairs, holdout, cache)
