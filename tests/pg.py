"""A real PostgreSQL with pgvector for the tests, from the pgserver package (it ships both).
Started once per test session in a folder of its own and stopped at the end; a missing
pgserver fails the tests that need it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """The URL of a running PostgreSQL server's ``postgres`` database."""
    import pgserver  # a missing test dependency is an error, never a skip

    with tempfile.TemporaryDirectory(prefix="chunkmill-pg-") as folder:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def fresh_database(url: str, name: str) -> str:
    """A new, empty database on the server of ``url``; returns its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.replace("/postgres?", f"/{name}?", 1)
