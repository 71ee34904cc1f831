"""`ModelOptions`, the options every model plugin understands, in a module of its own without torch:
`negharness run` builds them, and answers a cached rerun from its records, before torch loads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from negharness.contracts.options import BindsOptions, OptionSpec, canonical_text, frozen_empty, split_options
from negharness.contracts.plugin_source import PluginSource, require_plugins
from negharness.contracts.sampling import FrameSampling


@dataclass
class ModelOptions(BindsOptions):
    """Options every model plugin understands, plus free-form ``extra`` (``-M key=value``).

    ``plugins`` is the run's plugin lookup (a `PluginSource`), set by the host before it calls a
    factory, so a wrapper (the boolean baseline, a trained model) makes its base model the way the
    run makes every plugin; it is not an option and never part of a fingerprint.
    """

    arch: str | None = None
    pretrained: str | None = None
    checkpoint: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    plugins: Any = field(default=None, compare=False, repr=False)
    # set by the host (`bind`) from ``extra`` and the factory's declared options (`takes_options`):
    # the typed values, defaults filled in, read-only; and, for a wrapper that passes the rest on, the
    # raw ``-M`` keys it does not declare. Derived from ``extra``, so never compared or fingerprinted.
    values: Mapping[str, Any] = field(default_factory=frozen_empty, compare=False, repr=False)
    rest: Mapping[str, str] = field(default_factory=frozen_empty, compare=False, repr=False)
    bound: bool = field(default=False, compare=False, repr=False)

    def lookup(self) -> PluginSource:
        """The run's plugin lookup (outside a run: ``ModelOptions(plugins=negharness.api.installed_plugins())``)."""
        return require_plugins(self.plugins, "a wrapper model's factory")

    def frame_sampling(self) -> "FrameSampling | None":
        """``-M frames=segments:12`` or ``-M frames=fps:2``: how this model samples video frames."""
        spec = self.extra.get("frames")
        return FrameSampling.parse(spec, "-M frames") if spec else None

    def as_dict(self) -> dict[str, Any]:
        """The options as given (``-M`` values as typed on the command line)."""
        out: dict[str, Any] = {k: v for k, v in (("arch", self.arch), ("pretrained", self.pretrained),
                                                  ("checkpoint", self.checkpoint)) if v is not None}
        out.update(self.extra)
        return out

    def identity(self, specs: "Mapping[str, OptionSpec] | None", model: str,
                 passes_rest: bool = False) -> dict[str, Any]:
        """The options that name this model in its record folder, label and config hash: each ``-M``
        value the factory declares bound to its type and written one way (`canonical_text`:
        ``quick_gelu=1``, ``=YES`` and ``=true`` are all ``true``), dropped when it equals the declared
        default (``jpeg_draft=false`` is no option at all); undeclared keys (a factory that declares
        none, a wrapper's rest) as given. A bad value is the binding's error, naming the model."""
        out = {k: v for k, v in self.as_dict().items() if k not in self.extra}
        if specs is None:
            return {**out, **self.extra}
        values, rest = split_options(self.extra, specs, self.FLAG, f"{self.OWNER} {model!r}", passes_rest)
        for key in sorted(self.extra):
            if key in rest:
                out[key] = rest[key]
            elif values[key] != specs[key].default:
                out[key] = canonical_text(values[key], self.extra[key])
        return out
