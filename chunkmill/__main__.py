"""``python -m chunkmill``. Importing the package, which Python does first, already made a
Ctrl-C during start-up one line (``chunkmill.early_signals``)."""

import sys

from chunkmill.pipeline.cli import main

sys.exit(main())
