"""``python -m litemq``: the same as the ``litemq`` command."""

import sys

from litemq.cli import main

sys.exit(main())
