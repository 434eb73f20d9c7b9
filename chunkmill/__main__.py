import sys

from chunkmill.pipeline.cli import main

sys.exit(main())
