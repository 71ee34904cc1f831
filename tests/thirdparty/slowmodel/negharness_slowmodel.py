"""A test model slow enough to kill mid-run: the embedded world's shapes_clip, sleeping per batch.

Each encoded batch is logged (kind and size, one appended line) to $NEGHARNESS_SLOW_LOG, so a test
can compare what was encoded before a kill -9 with what the cache kept.
"""

import os
import time

from negharness.discovery.hookspecs import hookimpl
from negharness.plugins.shapes_clip import shapes_clip


def _sleep(share: float = 1.0) -> None:
    """Sleep $NEGHARNESS_SLOW_SLEEP seconds (0.25 unset) times ``share``, read at each batch: a test's run in
    its own process may be slowed down while a run in the test's process is not."""
    time.sleep(float(os.environ.get("NEGHARNESS_SLOW_SLEEP", "0.25")) * share)


def _log(kind, n):
    path = os.environ.get("NEGHARNESS_SLOW_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{kind} {n}\n")


def slow_shapes(options):
    model = shapes_clip(options)
    model.name = "slow_shapes"
    image, text = model.encode_image, model.encode_text

    def encode_image(pixels):
        _sleep()
        out = image(pixels)
        _log("image", pixels.shape[0])
        return out

    def encode_text(texts):
        _sleep(1 / 5)
        out = text(texts)
        _log("text", len(texts))
        return out

    model.encode_image, model.encode_text = encode_image, encode_text
    return model


@hookimpl
def negharness_register_models(registry):
    registry.add("slow_shapes", slow_shapes, "shapes_clip that sleeps per batch (kill -9 tests)")
