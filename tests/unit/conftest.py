"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def docs(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("hello\n")
    return tmp_path / "docs"
