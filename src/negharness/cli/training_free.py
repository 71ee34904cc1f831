"""Training-free methods beside the trainers: model wrappers that make a model negation-aware without
training (``boolean``, nT2VR's boolean baseline; ``steer``, Sammani et al.'s steering). A model
plugin says it is one by registering with ``training_free="<the command that runs it>"``
(`negharness.api.Registrar.add`); `negharness list --kind trainer` shows these after the trainers,
the reference's trainers page lists them, and `negharness train --trainer NAME` on one says there is
nothing to train and names the command.
"""

from __future__ import annotations

from typing import Any

from negharness.contracts.errors import UserError

HEADING = "training-free methods (model wrappers: nothing to train, run them with negharness run)"


def training_free(registry: Any, names: list[str] | None = None) -> list[Any]:
    """The model entries registered as training-free methods (those among ``names`` when given)."""
    return [e for e in registry.entries("model") if isinstance(e.meta.get("training_free"), str)
            and (names is None or e.name in names)]


def run_command(entry: Any) -> str:
    """How a training-free method is run, as its registration says."""
    command: str = entry.meta["training_free"]
    return command


def print_training_free(console: Any, entries: list[Any]) -> None:
    """The training-free methods, after the trainers: a table in a terminal, tab-separated lines elsewhere."""
    if not entries:
        return
    if not console.is_terminal:
        lines = [f"# {HEADING}: name, plugin, description, how to run (tab-separated)"]
        lines += ["\t".join(" ".join(str(c).split()) for c in (e.name, e.plugin, e.description, run_command(e)))
                  for e in entries]
        print("\n".join(lines), file=console.file)  # plain: Rich would expand the tabs
        return
    from rich.table import Table

    table = Table(title=HEADING, title_justify="left")
    table.add_column("name", style="cyan", overflow="fold", min_width=12)
    table.add_column("plugin", overflow="fold")
    table.add_column("description", overflow="fold")
    table.add_column("run", overflow="fold", min_width=24)
    for e in entries:
        table.add_row(e.name, e.plugin, e.description, run_command(e))
    console.print(table)


def refuse_training_free(registry: Any, trainer: str) -> None:
    """``negharness train --trainer steer``: no trainer of that name, but a training-free method; say so
    and name the command that runs it (any other unknown name is the registry's to answer)."""
    if trainer in registry.names("trainer"):
        return
    found = training_free(registry, [trainer])
    if found:
        raise UserError(f"--trainer {trainer}: {trainer} needs no training (a model wrapper); run it: "
                        f"{run_command(found[0])} --task ...")
    free = [e.name for e in training_free(registry)]
    close = registry.close_names("trainer", trainer, free)
    if any(name in free for name in close):  # else the registry's own error names the close trainers
        said = ", ".join(f"{n} (needs no training)" if n in free else n for n in close)
        raise UserError(f"unknown trainer {trainer!r}; did you mean {said}? `negharness list --kind trainer` "
                        "shows both")
