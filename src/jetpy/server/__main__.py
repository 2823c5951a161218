"""``python -m jetpy.server``: the same as ``jetpy-server``."""

import sys

from jetpy.server.main import main

sys.exit(main())
