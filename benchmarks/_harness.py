"""Shared by the side-by-side benchmarks: where each side runs, running one side, tables.

Each benchmark script is both a driver and a worker: the driver runs the script again with
`--side fathom|deepagents ...` under that side's interpreter and reads the JSON line the worker
prints. The reference implementation runs in `benchmarks/.venv-deepagents`, with `src/` on
`PYTHONPATH` only so it can import fathom's scripted model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

REPO_ROOT = Path(__file__).resolve().parent.parent
FATHOM_PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
REF_PYTHON = REPO_ROOT / "benchmarks" / ".venv-deepagents" / "bin" / "python"


def available_sides(ref_python: Path = REF_PYTHON) -> list[tuple[str, Path]]:
    """`(side, interpreter)` for fathom, and for deepagents when its environment exists.

    Without the reference environment a note says how to create it, and only fathom runs.
    """
    fathom_python = FATHOM_PYTHON if FATHOM_PYTHON.exists() else Path(sys.executable)
    sides = [("fathom", fathom_python)]
    if ref_python.exists():
        sides.append(("deepagents", ref_python))
    else:
        print(
            f"Reference environment not found ({ref_python}); measuring fathom only. "
            "`make bench` creates it (benchmarks/.venv-deepagents, deepagents==0.7.32).",
            file=sys.stderr,
        )
    return sides


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
    # Logs and pipes get a wide table rather than Rich's 80-column default.
    Console(width=None if sys.stdout.isatty() else 160).print(table)


@dataclass(frozen=True)
class Row:
    """One line of the combined benchmark table: a figure for each side.

    `ratio` is deepagents ÷ fathom. With `better="lower"` (sizes, times) a ratio above 1
    means fathom does better; with `better="higher"` (fractions such as prefix reuse) a
    ratio below 1 does. A side that cannot do the work has `None`.
    """

    section: str
    metric: str
    unit: str
    fathom: float | None
    deepagents: float | None
    better: Literal["lower", "higher"] = "lower"
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """deepagents ÷ fathom, when both sides have a non-zero figure."""
        if self.fathom in (None, 0) or self.deepagents is None:
            return None
        return self.deepagents / self.fathom

    @property
    def winner(self) -> str:
        """"fathom", "deepagents", "tie" (within 2 %), or "" when a side is missing."""
        ratio = self.ratio
        if ratio is None:
            return ""
        if abs(ratio - 1) <= 0.02:
            return "tie"
        fathom_better = ratio > 1 if self.better == "lower" else ratio < 1
        return "fathom" if fathom_better else "deepagents"

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data, ratio and winner included."""
        return {**asdict(self), "ratio": self.ratio, "winner": self.winner}


def median_of(values: Sequence[float]) -> float:
    """The median of at least one value."""
    if not values:
        raise ValueError("median_of needs at least one value")
    return statistics.median(values)


def side_parser(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's command line: `--side` (worker mode) and `--ref-python` (driver)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--side", choices=("fathom", "deepagents"),
                        help="run one side (worker mode)")
    parser.add_argument(
        "--ref-python",
        type=Path,
        default=REF_PYTHON,
        help="driver: interpreter with deepagents installed (default: %(default)s)",
    )
    return parser


def positive_int(text: str) -> int:
    """An `argparse` type: an int of at least 1."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an int: {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def positive_float(text: str) -> float:
    """An `argparse` type: a number above 0."""
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def int_list(text: str) -> list[int]:
    """An `argparse` type: comma-separated positive ints, e.g. `50,200`."""
    values = [positive_int(part.strip()) for part in text.split(",") if part.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"no numbers in {text!r}")
    return values


def timed_invoke(agent: Any, payload: Any, mode: str) -> tuple[float, Any]:
    """Run `agent` once on `payload` with `invoke` (mode "invoke") or `ainvoke` (any other
    mode, in a fresh event loop); the wall seconds of that call alone, and its result."""
    if mode == "invoke":
        start = time.perf_counter()
        result = agent.invoke(payload)
        return time.perf_counter() - start, result

    async def run() -> tuple[float, Any]:
        begin = time.perf_counter()
        out = await agent.ainvoke(payload)
        return time.perf_counter() - begin, out

    return asyncio.run(run())
