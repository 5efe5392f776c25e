"""A throwaway PostgreSQL cluster: `initdb` and `pg_ctl`, listening on a Unix socket only.

`throwaway_postgres()` is a context manager that creates a fresh cluster in a temporary
directory, starts it on a Unix socket (no TCP address), yields its connection string, and
stops it (`-m immediate`) and deletes its files on exit. Tests use it through the
`tests.postgres.postgres_uri` fixture; the replica benchmarks and the soak script use it
directly, so each run gets a clean database without a PostgreSQL service on the machine.

```python
from fathom.testing.postgres import throwaway_postgres

with throwaway_postgres() as url:  # postgresql://postgres@/postgres?host=/tmp/...&port=5432
    ...
```

As root the server runs as an unprivileged user (`postgres`, else `nobody`), because
PostgreSQL refuses to run as root. Missing binaries raise `PostgresUnavailable`, so a caller
can skip or explain; a cluster that fails to start raises `PostgresStartFailed` with the
server's log. Standard library only: this module sits in the lowest layer.
"""

from __future__ import annotations

import contextlib
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

from fathom.errors import FathomError

__all__ = [
    "PostgresStartFailed",
    "PostgresUnavailable",
    "postgres_bindir",
    "throwaway_postgres",
]

PORT = 5432
"""Only names the socket file (`.s.PGSQL.5432`): the server listens on no TCP address."""


class PostgresUnavailable(FathomError):
    """The PostgreSQL server binaries (`initdb`, `pg_ctl`), or a user to run them as, are
    missing on this machine."""


class PostgresStartFailed(FathomError):
    """`initdb` or `pg_ctl start` failed; the message carries their output and the log."""


def postgres_bindir() -> Path | None:
    """The directory holding `initdb` and `pg_ctl`: on PATH, else Debian's newest version
    under `/usr/lib/postgresql/*/bin`; `None` when neither has both."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", Path(path).parent.parent.name))

    for initdb in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version, reverse=True):
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
    raise PostgresUnavailable("running as root and neither a 'postgres' nor a 'nobody' user exists")


def _prepare(root: Path, user: dict[str, Any]) -> Path:
    """Make the socket directory, both owned by the server's user; return the sockets dir."""
    sockets = root / "sock"
    sockets.mkdir()
    if user:
        for path in (root, sockets):
            os.chown(path, user["user"], user["group"])
    return sockets


def _start(bindir: Path, root: Path, sockets: Path, run: dict[str, Any]) -> None:
    """`initdb` then `pg_ctl start -w`; `PostgresStartFailed` with the output and the log."""
    data, log = root / "data", root / "server.log"
    try:
        subprocess.run(
            [bindir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"], **run
        )
        options = f"-k {sockets} -c listen_addresses='' -p {PORT}"
        subprocess.run([bindir / "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "start"],
                       **run)  # fmt: skip
    except subprocess.CalledProcessError as error:
        server_log = log.read_text(errors="replace") if log.exists() else ""
        raise PostgresStartFailed(
            f"could not start PostgreSQL: {error.stderr or error.stdout}\n{server_log}"
        ) from error


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A connection string to a fresh PostgreSQL cluster, stopped and deleted on exit.

    Raises `PostgresUnavailable` when the server binaries are missing, and
    `PostgresStartFailed` when the cluster does not start.
    """
    bindir = postgres_bindir()
    if bindir is None:
        raise PostgresUnavailable("initdb and pg_ctl not found (install PostgreSQL's server)")
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="fathom-pg-"))
    run: dict[str, Any] = {"check": True, "capture_output": True, "text": True, **user}
    with contextlib.ExitStack() as on_failure:
        # cleanup: a cluster that does not start leaves nothing behind (re-raised)
        on_failure.callback(shutil.rmtree, root, ignore_errors=True)
        sockets = _prepare(root, user)
        _start(bindir, root, sockets, run)
        on_failure.pop_all()
    try:
        yield f"postgresql://postgres@/postgres?host={sockets}&port={PORT}"
    finally:
        subprocess.run([bindir / "pg_ctl", "-D", root / "data", "-m", "immediate", "-w", "stop"],
                       **{**run, "check": False})  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
