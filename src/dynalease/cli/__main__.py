"""``python -m dynalease.cli``: the ``dynalease`` command."""

import sys

from . import main

sys.exit(main())
