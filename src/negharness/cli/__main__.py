"""``python -m negharness.cli``: the same entry point as the ``negharness`` console script."""

from negharness.cli.main import main

raise SystemExit(main())
