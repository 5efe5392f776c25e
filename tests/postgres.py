"""A throwaway PostgreSQL cluster for tests: `initdb` and `pg_ctl`, on a Unix socket only.

The `postgres_uri` fixture (module-scoped) starts a fresh cluster listening only on a Unix
socket in a temporary directory, yields its connection string, and stops and removes it at
the end. As root, the server runs as an unprivileged user (PostgreSQL refuses to run as
root). It skips only when the PostgreSQL server binaries are not installed; `.ci/run`
installs Debian's `postgresql` package, so CI runs the tests that use it. Import the fixture
into a test module: `from tests.postgres import postgres_uri`.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.system_requirements import needs

__all__ = ["postgres_uri"]

PORT = 5432  # only names the socket file: the server listens on no TCP address


def _pg_bindir() -> Path | None:
    """The directory holding `initdb` and `pg_ctl`: on PATH, else Debian's newest version."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = glob.glob("/usr/lib/postgresql/*/bin/initdb")

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", Path(path).parent.parent.name))

    for initdb in sorted(versions, key=version, reverse=True):
        if (Path(initdb).parent / "pg_ctl").exists():
            return Path(initdb).parent
    return None


def _server_user() -> dict[str, Any]:
    """`subprocess` arguments that run the server unprivileged when this process is root."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    pytest.skip("running as root and neither a 'postgres' nor a 'nobody' user exists")


@pytest.fixture(scope="module")
def postgres_uri() -> Iterator[str]:
    """A connection string to a fresh PostgreSQL cluster, removed after the module."""
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip(needs("postgresql", "initdb and pg_ctl not found"))
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="fathom-pg-"))
    data, sockets, log = root / "data", root / "sock", root / "server.log"
    sockets.mkdir()
    if user:
        os.chown(root, user["user"], user["group"])
        os.chown(sockets, user["user"], user["group"])
    run: dict[str, Any] = {"check": True, "capture_output": True, "text": True, **user}
    try:
        subprocess.run(
            [bindir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"], **run
        )
        options = f"-k {sockets} -c listen_addresses='' -p {PORT}"
        subprocess.run([bindir / "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "start"],
                       **run)  # fmt: skip
    except subprocess.CalledProcessError as error:
        server_log = log.read_text() if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(
            f"could not start PostgreSQL: {error.stderr or error.stdout}\n{server_log}"
        ) from error
    try:
        yield f"postgresql://postgres@/postgres?host={sockets}&port={PORT}"
    finally:
        subprocess.run([bindir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                       **{**run, "check": False})  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
