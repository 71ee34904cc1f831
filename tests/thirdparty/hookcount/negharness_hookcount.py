"""A hook-style plugin that marks each import of its module: the index must spare the second one."""
import os
from pathlib import Path

from negharness.api import hookimpl

Path(os.environ["NEGHARNESS_TEST_IMPORT_MARK"]).open("a").write("hookcount\n")


@hookimpl
def negharness_register_models(registry):
    from negharness.testing import keyword_model

    registry.add("hookcount_kw", lambda options: keyword_model(options), "keyword model, a callable target",
                 note="kept")
    registry.add("hookcount_str", "negharness.testing:keyword_model", "keyword model, a string target")
