"""Fuzz every reader of OCF (the package python/tools/fuzzing says how).

    python python/tools/fuzz.py --seconds 600 [--seed N] [--artifacts DIR] [--json]
"""

from __future__ import annotations

import sys

from fuzzing.campaign import main

if __name__ == "__main__":
    sys.exit(main())
