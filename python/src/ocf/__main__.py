"""``python -m ocf`` runs the ``ocf`` command line."""

import sys

from ocf.cli.main import main

sys.exit(main())
