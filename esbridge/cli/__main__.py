"""``python -m esbridge.cli``: the ``esbridge`` command."""

from esbridge.cli.main import main

raise SystemExit(main())
