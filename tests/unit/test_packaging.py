"""The package's shape: one import name, rooms that keep to their rule, nothing that shadows
the standard library, and a wheel that installs ``chunkmill`` alone."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from scripts.typecheck import folder_packages, installed_name
from tests.tree import ROOT, source_files

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# The pure core: every module of chunkmill/ (transforms/ and pipeline/ are mapped beside it).
PURE = sorted(
    p
    for p in (ROOT / "chunkmill").rglob("*.py")
    if p.name != "__main__.py"  # the command's entry point: ``python -m chunkmill``
)
SOURCES = source_files({".py"})


def imported(path: Path, *, at_import: bool = False) -> set[str]:
    """Every module name an import statement in ``path`` names (relative ones excluded); with
    ``at_import``, only those run when the module is imported."""
    tree = ast.parse(path.read_text(), str(path))
    inside = set()
    if at_import:  # not inside a function, nor under ``if TYPE_CHECKING:``
        for node in ast.walk(tree):
            typing_only = isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
            if typing_only or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                inside |= {id(n) for n in ast.walk(node)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_rooms_are_where_the_rules_look():
    assert len(PURE) > 20
    assert ROOT / "chunkmill" / "document.py" in PURE
    assert ROOT / "transforms" / "core.py" in SOURCES


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_imports_the_folders_by_their_repository_names(path: Path):
    # pytest puts the repository on sys.path, where pipeline/ and transforms/ are importable
    # at the top; a module imported by that name would be a second copy of the installed one.
    wrong = sorted(n for n in imported(path) if n.split(".")[0] in ("pipeline", "transforms"))
    assert wrong == []


def test_the_development_install_imports_chunkmill_alone(tmp_path: Path):
    # Outside the repository and without PYTHONPATH, only what the install provides is
    # importable: chunkmill, with pipeline/ and transforms/ under it, and no top-level copies.
    code = (
        "import importlib, chunkmill.pipeline.cli, chunkmill.transforms.core\n"
        "print(chunkmill.pipeline.cli.__file__)\n"
        "print(chunkmill.transforms.core.__file__)\n"
        "for name in ('pipeline', 'transforms'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as e:\n"
        "        print(e.name, 'missing')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        str(ROOT / "pipeline" / "cli.py"),
        str(ROOT / "transforms" / "core.py"),
        "pipeline missing",
        "transforms missing",
    ]


def test_no_symlink_in_the_tree():
    listing = subprocess.run(
        ["git", "ls-files", "--stage"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    entries = listing.stdout.splitlines()
    links = [line.split("\t")[1] for line in entries if line.startswith("120000")]
    assert links == []


def test_every_folder_of_the_package_is_listed_under_its_installed_name():
    with (ROOT / "pyproject.toml").open("rb") as f:
        listed = tomllib.load(f)["tool"]["setuptools"]["packages"]
    folders = {"chunkmill": "chunkmill", **folder_packages()}
    expected = {
        installed_name(".".join(d.relative_to(ROOT).parts), folders)
        for top in folders
        for d in [ROOT / top, *(ROOT / top).rglob("*")]
        if d.is_dir()
        and "__pycache__" not in d.parts
        and ((d / "__init__.py").exists() or "sample_corpus" in d.parts)
    }
    assert sorted(listed) == sorted(expected)
    assert "chunkmill.pipeline.sample_corpus.pdfs" in listed


def test_mypy_sees_the_folders_under_their_installed_names():
    assert folder_packages() == {
        "pipeline": "chunkmill.pipeline",
        "transforms": "chunkmill.transforms",
    }
    assert installed_name("pipeline.cli", folder_packages()) == "chunkmill.pipeline.cli"
    assert installed_name("transforms", folder_packages()) == "chunkmill.transforms"
    assert installed_name("chunkmill.api", folder_packages()) == "chunkmill.api"


def module_name(path: Path) -> str:
    """The installed name of the module at ``path`` (pipeline/cli.py: chunkmill.pipeline.cli)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return installed_name(".".join(parts), folder_packages()).removesuffix(".__init__")


def test_the_chunking_modules_form_no_import_circle():
    # Every import counts, a function's too: the registry imports the strategies, which import
    # the contract and the helpers beside it, never the registry.
    modules = {module_name(p): p for p in (ROOT / "chunkmill" / "chunking").glob("*.py")}
    graph = {m: set() for m in modules}
    for m, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            graph[m] |= {n for n in names if n in modules and n != m}

    def in_a_circle(start: str) -> bool:
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module == start:
                return True
            if module not in seen:
                seen.add(module)
                todo.extend(graph[module])
        return False

    assert len(graph) > 10
    assert sorted(m for m in graph if in_a_circle(m)) == []


def test_the_config_does_not_import_the_parser_sandbox():
    assert "chunkmill.isolation" not in imported(ROOT / "chunkmill" / "config.py")


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pure_core_imports_no_beam(path: Path):
    # A function may import the Beam side on demand (``chunkmill.ChunkCorpus``); the module
    # itself never does.
    beam = sorted(
        n
        for n in imported(path, at_import=True)
        if n.split(".")[0] == "apache_beam"
        or n.startswith(("chunkmill.transforms", "chunkmill.pipeline"))
    )
    assert beam == []


def test_importing_the_pure_core_loads_no_beam():
    modules = [
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for p in PURE
    ]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.startswith('apache_beam')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_per_document_code_loads_no_pyarrow():
    # It runs in every parser child too: pyarrow there would cost each child its memory.
    code = (
        "import sys, chunkmill.document, chunkmill.chunking, chunkmill.extract\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'numpy')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_module_is_named_after_one_of_the_standard_library():
    names = {
        p.stem
        for folder in ("chunkmill", "pipeline", "transforms", "benchmarks")
        for p in (ROOT / folder).rglob("*.py")
    }
    names |= {
        p.name
        for folder in ("chunkmill", "pipeline", "transforms")
        for p in (ROOT / folder).rglob("*")
        if p.is_dir() and "sample_corpus" not in p.parts
    }
    assert sorted(names & set(sys.stdlib_module_names)) == []


@pytest.mark.slow
def test_the_wheel_installs_chunkmill_alone_with_the_sample_corpus(tmp_path: Path):
    # Built from a copy: setuptools leaves a build/ folder beside the sources it builds.
    source = tmp_path / "source"
    skip = shutil.ignore_patterns(".git", ".venv*", "out", "build", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT, source, ignore=skip)
    wheel_dir = tmp_path / "wheel"
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--verbose", "--no-deps", "-w"]
    build = subprocess.run(
        [*pip_wheel, str(wheel_dir), str(source)], check=True, capture_output=True, text=True
    )
    assert "absent from the `packages` configuration" not in build.stdout + build.stderr
    (wheel,) = wheel_dir.glob("chunkmill-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"chunkmill"}
    corpus = ROOT / "pipeline" / "sample_corpus"
    shipped = {
        n.removeprefix("chunkmill/pipeline/sample_corpus/") for n in names if "/sample_corpus/" in n
    }
    expected = {
        str(p.relative_to(corpus))
        for p in corpus.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert shipped == expected
    assert "chunkmill/transforms/core.py" in names and "chunkmill/document.py" in names
    assert "chunkmill/pipeline/cli.py" in names and "chunkmill/py.typed" in names
