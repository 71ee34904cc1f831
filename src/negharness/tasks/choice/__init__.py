"""Built-in YAML choice tasks (SugarCrepe, ARO, VALSE, CREPE, CC-Neg, NegVQA) and the papers' tables they name."""

from negharness.api.published import tables_beside

PUBLISHED = tables_beside(__file__)  # TripletCLIP's SugarCrepe table (the YAMLs name it with `published:`)
