"""Built-in trainer plugin."""

from __future__ import annotations

from negharness.api import Registrar, hookimpl

# each trainer's -O options are declared in a module without torch (its factory is decorated with the same
# object): `negharness train` checks them before torch loads
RECIPES = "negharness.plugins.negation_training"


@hookimpl
def negharness_register_trainers(registry: Registrar) -> None:
    registry.add("shapes_pretrain", "negharness.plugins.shapes_pretrain:train",
                 "train the embedded world's tiny CLIP from scratch (reproduces the bundled weights)",
                 options="negharness.plugins.options:SHAPES_PRETRAIN", reads_trainset=False)
    registry.add("bnl", "negharness.plugins.training_run:bnl",
                 "nT2VR bidirectional negation learning: triplet + lambda (l_bcl(x,q,q-) + l_bcl(q,x,q-))",
                 options=f"{RECIPES}:BNL", reads_trainset=True)
    registry.add("snl", "negharness.plugins.training_run:snl",
                 "nT2VR simple negation learning: triplet + lambda_1 l_tri(x,q,q-)",
                 options=f"{RECIPES}:SNL", reads_trainset=True)
    registry.add("snl_query", "negharness.plugins.training_run:snl_query",
                 "nT2VR SNL with the query as pivot: triplet + lambda_1 l_tri(q,x,q-) (Table 5 row 3)",
                 options=f"{RECIPES}:SNL_QUERY", reads_trainset=True)
    registry.add("negbench", "negharness.plugins.training_run:negbench",
                 "NegBench fine-tuning: alpha L_CLIP (true negations) + (1 - alpha) L_MCQ",
                 options=f"{RECIPES}:NEGBENCH", reads_trainset=True)
    registry.add("triplet", "negharness.plugins.training_run:triplet",
                 "CLIP*: plain triplet-loss fine-tuning (nT2VR Eq. 2), the baseline of the others",
                 options=f"{RECIPES}:TRIPLET", reads_trainset=True)
