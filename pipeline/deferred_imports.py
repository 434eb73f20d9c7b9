"""Cloud clients that Beam imports with itself, executed only when first used.

``import apache_beam`` imports every client library it finds installed (Pub/Sub, BigQuery,
the Dataflow API, boto3) and keeps the module, or None, for later; with chunkmill's ``gcp``
and ``aws`` extras installed that is a quarter of a second of every command's start-up, for
clients a local run never calls. ``install()`` puts a finder first on ``sys.meta_path`` that
finds these modules as usual but runs their code on first access to one of their
attributes, the way ``importlib.util.LazyLoader`` does. Unlike LazyLoader it answers
``__spec__`` without loading (Python reads it on every later ``import`` of the module) and
loads once under a lock, so threads that reach a client together see it whole.

Only the chunkmill command installs it (``chunkmill.pipeline.cli``): a program that imports
chunkmill keeps its own import system. Beam's SDK worker processes import as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import types
from collections.abc import Sequence
from typing import Any, cast

# Modules Beam imports at its own import and keeps for when a pipeline reads or writes
# Pub/Sub, BigQuery, submits to Dataflow or reaches S3; each is bound as a module object
# and not read from at Beam's import.
DEFERRED = frozenset(
    {
        "google.cloud.pubsub",
        "google.cloud.bigquery",
        "google.cloud.bigquery_storage_v1",
        "google.cloud.dataflow",
        "boto3",
    }
)

_lock = threading.RLock()
_loading: set[str] = set()


class _DeferredModule(types.ModuleType):
    """A module whose code has not run yet: looking up any name it does not hold yet (its
    attributes, ``__path__`` for a submodule's import) runs it first."""

    def __getattr__(self, name: str) -> Any:
        _load(self, name)
        return getattr(self, name)


def _load(module: types.ModuleType, name: str) -> None:
    spec = module.__spec__
    assert spec is not None
    with _lock:
        if type(module) is not _DeferredModule:  # another thread loaded it meanwhile
            return
        if spec.name in _loading:  # its own code, still running, asks for what it lacks
            raise AttributeError(f"partially initialized module {spec.name!r} has no {name!r}")
        loader = spec.loader
        assert isinstance(loader, _DeferringLoader)
        spec.loader = module.__loader__ = loader.loader
        if spec.submodule_search_locations is not None:
            module.__path__ = spec.submodule_search_locations
        _loading.add(spec.name)
        try:
            loader.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(spec.name, None)  # as a failed import leaves it
            raise
        finally:
            _loading.discard(spec.name)
            cast(Any, module).__class__ = types.ModuleType  # loaded: a plain module


class _DeferringLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.machinery.SourceFileLoader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module, as the source loader makes it

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__.pop("__path__", None)  # a submodule's import loads the package first
        module.__class__ = _DeferredModule


class DeferringFinder(importlib.abc.MetaPathFinder):
    """Finds the modules ``names`` with the finders after it, and defers their code."""

    def __init__(self, names: frozenset[str] = DEFERRED) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            # Only plain Python source (an extension module runs when it is created), and
            # not for a reload (``target``), which runs the module again at once.
            if target is None and isinstance(spec.loader, importlib.machinery.SourceFileLoader):
                spec.loader = _DeferringLoader(spec.loader)
            return spec
        return None


def install() -> None:
    """Defers the ``DEFERRED`` modules imported from now on (once per process)."""
    if not any(isinstance(f, DeferringFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, DeferringFinder())


def is_deferred(module: types.ModuleType) -> bool:
    """Whether ``module`` was imported and its code has not run yet."""
    return type(module) is _DeferredModule
