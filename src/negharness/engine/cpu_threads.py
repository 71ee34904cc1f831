"""OpenMP waiting policy for runs where decoding shares the CPU with the forward pass.

Between parallel regions, torch's OpenMP threads spin for a while before sleeping; while the runner's
decode thread wants the same cores, that spinning takes CPU from it. Passive waiting returned a
measured 5-10 points of decode-in-the-loop throughput on 2 cores with no clear change to the pure
forward (perf/bench_decode_throughput.py). OpenMP reads the setting once, when torch loads, so
it must be chosen before the first ``import torch``; a value the user set always wins.
"""

from __future__ import annotations

import os
import sys


def prefer_passive_waiting() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the user chose a policy or torch is already loaded.

    Returns whether the setting will take effect.
    """
    if "torch" in sys.modules:
        return os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return os.environ["OMP_WAIT_POLICY"].upper() == "PASSIVE"
