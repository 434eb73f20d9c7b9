"""chunkmill: incremental chunking of a document corpus into Parquet tables, on Apache Beam.

The package's rooms: the pure core at this level (``ids``, ``schema``, ``config``,
``document``, ``chunking``, ``extract``: no Beam), the Beam composites in
``chunkmill.transforms`` and the command line in ``chunkmill.pipeline``.
"""

from chunkmill.versions import chunkmill_version

__version__ = chunkmill_version()
