"""``python -m vdq.cli``: the same as the ``vdq`` command."""

import sys

from vdq.cli.main import main

sys.exit(main())
