"""A declared plugin whose import fails: it leaves a mark first, so a test sees whether a command tried."""
import os
from pathlib import Path

Path(os.environ["NEGHARNESS_TEST_IMPORT_MARK"]).open("a").write("lazyfail\n")
raise ImportError("this plugin's import fails on purpose")
