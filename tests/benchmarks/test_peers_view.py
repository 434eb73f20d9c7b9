"""``benchmarks.peers --baseline`` measures the baseline tree's code, every package of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.peers import source_view

ROOT = Path(__file__).parents[2]
WHERE = (
    "import chunkmill, chunkmill.pipeline.cli as c, chunkmill.transforms.core as t; "
    "print(chunkmill.__file__, c.__file__, t.__file__, sep='\\n')"
)


def _tree(path: Path) -> Path:
    """A copy of this tree's three source folders, as ``git archive`` would give them."""
    path.mkdir()
    for folder in ("chunkmill", "pipeline", "transforms"):
        subprocess.run(["cp", "-r", str(ROOT / folder), str(path / folder)], check=True)
    return path


def _imported_from(cwd: Path) -> list[Path]:
    done = subprocess.run(
        [sys.executable, "-c", WHERE], cwd=cwd, capture_output=True, text=True, check=True
    )
    return [Path(line) for line in done.stdout.split()]


def test_a_view_runs_every_package_from_its_tree(tmp_path: Path):
    tree = _tree(tmp_path / "tree")
    view = source_view(tree, tmp_path / "view")
    files = [p.resolve() for p in _imported_from(view)]
    assert all(p.is_relative_to(tree.resolve()) for p in files), files


def test_the_tree_alone_would_mix_in_the_installed_packages(tmp_path: Path):
    # Why the view exists: run in the tree itself, only chunkmill/ comes from it.
    tree = _tree(tmp_path / "tree")
    files = [p.resolve() for p in _imported_from(tree)]
    assert files[0].is_relative_to(tree.resolve())
    assert not files[1].is_relative_to(tree.resolve())
