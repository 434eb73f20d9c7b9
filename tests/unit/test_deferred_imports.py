"""Deferred modules (chunkmill.pipeline.deferred_imports): found and bound at import, their
code run at the first use of one of their names, once, whole, in any thread."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from chunkmill.pipeline import deferred_imports
from chunkmill.pipeline.deferred_imports import DeferringFinder, is_deferred

ROOT = Path(__file__).parents[2]


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[Path]:
    """A folder on sys.path for the test's own modules, and a finder deferring them; both
    gone afterwards, with the modules the test imported."""
    finder = DeferringFinder(frozenset({"slow_client", "slow_pkg", "broken_client"}))
    sys.path.insert(0, str(tmp_path))
    sys.meta_path.insert(0, finder)
    before = set(sys.modules)
    yield tmp_path
    sys.meta_path.remove(finder)
    sys.path.remove(str(tmp_path))
    for name in set(sys.modules) - before:
        del sys.modules[name]


def ran(folder: Path) -> list[str]:
    path = folder / "ran.txt"
    return path.read_text().split() if path.exists() else []


def write_module(path: Path, body: str, record: str) -> None:
    """A module that appends ``record`` to the folder's ran.txt when its code runs."""
    ran_txt = str(path.parent.parent if path.parent.name == "slow_pkg" else path.parent)
    path.write_text(
        textwrap.dedent(f"""
        with open({ran_txt!r} + "/ran.txt", "a") as f:
            f.write({record!r} + "\\n")
        """)
        + textwrap.dedent(body)
    )


def test_a_deferred_module_runs_at_its_first_use_and_once(modules):
    write_module(modules / "slow_client.py", "ANSWER = 42\n", "slow_client")
    import slow_client  # type: ignore[import-not-found]

    assert ran(modules) == [] and is_deferred(slow_client)
    # What Python reads on every later import does not run it either.
    assert slow_client.__spec__.name == "slow_client"
    assert importlib.import_module("slow_client") is slow_client
    assert ran(modules) == []
    assert slow_client.ANSWER == 42
    assert ran(modules) == ["slow_client"] and not is_deferred(slow_client)
    assert slow_client.ANSWER == 42 and importlib.reload(slow_client).ANSWER == 42
    assert ran(modules) == ["slow_client", "slow_client"]  # the reload, not a deferred run


def test_a_missing_name_is_an_attribute_error_after_the_module_ran(modules):
    write_module(modules / "slow_client.py", "ANSWER = 42\n", "slow_client")
    import slow_client

    with pytest.raises(AttributeError, match="NOTHING"):
        _ = slow_client.NOTHING
    assert ran(modules) == ["slow_client"] and slow_client.ANSWER == 42


def test_importing_a_submodule_runs_its_deferred_package_first(modules):
    (modules / "slow_pkg").mkdir()
    write_module(modules / "slow_pkg" / "__init__.py", "NAME = 'pkg'\n", "slow_pkg")
    write_module(
        modules / "slow_pkg" / "part.py", "from slow_pkg import NAME\nPART = NAME\n", "part"
    )
    import slow_pkg  # type: ignore[import-not-found]

    assert ran(modules) == [] and is_deferred(slow_pkg)
    from slow_pkg.part import PART  # type: ignore[import-not-found]

    assert PART == "pkg" and ran(modules) == ["slow_pkg", "part"]


def test_threads_reaching_a_deferred_module_together_see_it_whole(modules):
    # Its code takes a while between two names: no thread may see the first without the last.
    write_module(
        modules / "slow_client.py", "import time\nFIRST = 1\ntime.sleep(0.2)\nLAST = 2\n", "slow"
    )
    import slow_client

    seen: list[tuple[int, int]] = []
    threads = [
        threading.Thread(target=lambda: seen.append((slow_client.FIRST, slow_client.LAST)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [(1, 2)] * 4 and ran(modules) == ["slow"]


def test_a_module_that_fails_fails_at_its_first_use_as_an_import_would(modules):
    write_module(modules / "broken_client.py", "raise ImportError('no such backend')\n", "bc")
    import broken_client  # type: ignore[import-not-found]

    with pytest.raises(ImportError, match="no such backend"):
        _ = broken_client.Client
    assert "broken_client" not in sys.modules  # the next import tries again


def test_modules_not_named_import_as_usual(modules):
    write_module(modules / "eager_client.py", "ANSWER = 1\n", "eager")
    import eager_client  # type: ignore[import-not-found]

    assert ran(modules) == ["eager"] and not is_deferred(eager_client)


# Imports Beam as a command does once the finder is installed, then tells which of the cloud
# clients Beam imported have not run, and whether one of them still works when used.
PROBE = """
import json, sys
from chunkmill.pipeline import deferred_imports
deferred_imports.install()
deferred_imports.install()  # once per process
import apache_beam
from apache_beam.io.gcp import pubsub
state = {n: deferred_imports.is_deferred(sys.modules[n])
         for n in sorted(deferred_imports.DEFERRED) if n in sys.modules}
finders = sum(isinstance(f, deferred_imports.DeferringFinder) for f in sys.meta_path)
works = pubsub.pubsub is None or isinstance(pubsub.pubsub.PublisherClient, type)
print(json.dumps({"state": state, "finders": finders, "works": works}))
"""


def test_beam_imported_by_a_command_leaves_its_cloud_clients_unrun():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["finders"] == 1 and report["works"]
    installed = {n for n in deferred_imports.DEFERRED if deferred_imports_installed(n)}
    assert set(report["state"]) == installed
    assert all(report["state"].values())


def deferred_imports_installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False
