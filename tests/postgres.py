"""The `postgres_uri` fixture: a throwaway PostgreSQL cluster per test module.

A thin wrapper over `fathom.testing.postgres.throwaway_postgres` (`initdb` and `pg_ctl`, a
Unix socket only, an unprivileged server user when run as root): the fixture yields the
cluster's connection string and stops and removes it after the module. It skips only when the
PostgreSQL server binaries (or a user to run them as) are missing; `.ci/run` installs Debian's
`postgresql` package, so CI runs the tests that use it. A cluster that fails to start fails
the tests, with the server's log. Import the fixture into a test module:
`from tests.postgres import postgres_uri`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from tests.system_requirements import needs

from fathom.testing.postgres import PostgresUnavailable, throwaway_postgres

__all__ = ["postgres_uri"]


@pytest.fixture(scope="module")
def postgres_uri() -> Iterator[str]:
    """A connection string to a fresh PostgreSQL cluster, removed after the module."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(throwaway_postgres())
        except PostgresUnavailable as missing:
            pytest.skip(needs("postgresql", str(missing)))
        yield url
