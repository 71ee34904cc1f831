"""``python -m negharness ...`` (what torchrun runs: ``torchrun --nproc-per-node N -m negharness train ...``)."""

import sys

from negharness.cli.main import main

sys.exit(main())
