"""What a trainer plugin receives. A trainer factory takes `TrainOptions` and returns the checkpoint path."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .model import ModelOptions


@dataclass
class TrainOptions:
    out: Path
    model: str | None = None
    model_options: ModelOptions = field(default_factory=ModelOptions)
    task: str | None = None
    seed: int = 0
    device: str = "auto"
    cache_dir: Path | None = None
    data_root: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)
    progress: Any = None
    plugins: Any = None  # the run's negharness.context.PluginLookup; the installed plugins when None

    def load_model(self, name: str, options: ModelOptions) -> Any:
        """A fresh model to train, made through the run's plugin lookup like every other plugin."""
        if self.plugins is None:
            from .context import PluginLookup

            self.plugins = PluginLookup.installed()
        return self.plugins.create("model", name, options)

    def get(self, key: str, default: Any, cast: Callable[[str], Any] = str) -> Any:
        """An ``-O key=value`` option, cast, with a clear error naming the option."""
        from .errors import UserError

        if key not in self.extra:
            return default
        try:
            return cast(self.extra[key])
        except ValueError as exc:
            raise UserError(f"-O {key}={self.extra[key]}: expected {cast.__name__}") from exc
