"""``python -m jetpy.cli``: the admin CLI without the `jetpy server` dispatch of ``jetpy.entry``."""

from __future__ import annotations

import sys

from jetpy.cli.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
