"""Flex Template entry point (FLEX_TEMPLATE_PYTHON_PY_FILE): ``chunkmill run`` with the
template's parameters.

The launcher calls ``python main.py --name=value ...`` with the template parameters
(metadata.json names chunkmill's options by their argparse dest, e.g. ``max_tokens``) and
Dataflow's own options (project, region, staging and temp locations, job name...).
``chunkmill run`` submits the job and returns, as a Flex Template launcher must.
"""

import sys

from chunkmill.pipeline.cli import main
from chunkmill.pipeline.launch import template_args

if __name__ == "__main__":
    args = template_args(sys.argv[1:])
    if not any(a == "--runner" or a.startswith("--runner=") for a in args):
        args.append("--runner=DataflowRunner")  # chunkmill alone would default to local
    sys.exit(main(["run", *args]))
