"""The SDK worker of ``--direct_running_mode=multi_processing``: Beam's own
(``apache_beam.runners.worker.sdk_worker_main``), started with SIGINT ignored.

Ctrl-C in a terminal reaches every process of the foreground group. Beam's worker would
answer it with a ``KeyboardInterrupt`` traceback per thread; ``chunkmill`` itself answers in
one line and stops its workers (``chunkmill.pipeline.interrupts``), so they ignore it.
"""

import signal
import sys

signal.signal(signal.SIGINT, signal.SIG_IGN)

from apache_beam.runners.worker import sdk_worker_main  # noqa: E402

if __name__ == "__main__":
    sdk_worker_main.main(sys.argv)
