"""Shared by the side-by-side benchmarks: where each side runs, running one side, tables.

Each benchmark script is both a driver and a worker: the driver runs the script again with
`--side fathom|deepagents ...` under that side's interpreter and reads the JSON line the worker
prints. The reference implementation runs in `benchmarks/.venv-deepagents`, with `src/` on
`PYTHONPATH` only so it can import fathom's scripted model.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
FATHOM_PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
REF_PYTHON = REPO_ROOT / "benchmarks" / ".venv-deepagents" / "bin" / "python"


class SideFailed(RuntimeError):
    """A worker subprocess failed or printed no JSON line."""


def run_worker(script: str, side: str, args: Sequence[str], python: Path) -> dict[str, Any]:
    """Run `script --side <side> <args>` under `python`; return the JSON line it printed."""
    env = dict(os.environ)
    if side == "deepagents":
        src = str(REPO_ROOT / "src")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    cmd = [str(python), str(Path(script).resolve()), "--side", side, *args]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-20:])
        raise SideFailed(f"{side} {' '.join(args)} failed (exit {proc.returncode}):\n{tail}")
    row: dict[str, Any] = json.loads(lines[-1])
    return row


def print_table(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], footer: str | None = None
) -> None:
    """Print a right-aligned table, with Rich when it is installed."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(headers)]
        print(title)
        print(" | ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
        print("-+-".join("-" * w for w in widths))
        for row in rows:
            print(" | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        if footer:
            print(footer)
        return
    table = Table(title=title, caption=footer)
    for header in headers:
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(*row)
    Console().print(table)
