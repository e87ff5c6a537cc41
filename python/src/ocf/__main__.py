"""``python -m ocf`` runs the ``ocf`` command line."""

import sys

from ocf.cli.launch import main

sys.exit(main())
