"""``python -m supermarket.experiments.paper002 study …``."""

from .study import main

raise SystemExit(main())
