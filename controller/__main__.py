"""``python -m controller`` is the same as the ``firebet`` console script."""

from controller.cli import main

raise SystemExit(main())
