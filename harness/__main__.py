"""``python -m negharness ...`` (what torchrun runs: ``torchrun --nproc-per-node N -m negharness train ...``)."""

import sys

from .cli import main

sys.exit(main())
