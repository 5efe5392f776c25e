"""How many bytes a SQLite checkpointer stores for an N-step agent run, fathom vs deepagents.

A scripted model (`fathom.testing.ScriptedModel`) makes the agent write N files of
2,000 bytes each, one `write_file` call per model turn, then answer "done". The run uses
`SqliteSaver` on a fresh database file; afterwards the script sums the bytes in the
`checkpoints` table (`checkpoint` + `metadata`) and the `writes` table (`value`).
`stored / written` is that sum divided by N x 2,000: 1x would mean every written byte is
stored once; a checkpointer that re-serialises the whole state at every step grows
quadratically, so the ratio grows with N.

Two modes:

* Worker: `--side fathom|deepagents --n N --db PATH` performs one run in the current
  interpreter and prints one JSON line.
* Driver (no `--side`): for each N in `--sizes` runs both sides as subprocesses, fathom
  with the project's `.venv/bin/python` and deepagents with `benchmarks/.venv-deepagents`
  (`PYTHONPATH=src`, so the reference side can import `fathom.testing`'s scripted model
  and nothing else of fathom's), then prints a table.

`make bench` creates the reference environment and runs the driver.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import string
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from _harness import REF_PYTHON, Row, SideFailed, available_sides, int_list, run_worker, side_parser
from _harness import print_table as _print_table

Side = Literal["fathom", "deepagents"]
SIDES: tuple[Side, ...] = ("fathom", "deepagents")

FILE_BYTES = 2_000
DEFAULT_SIZES = (50, 100, 200, 400)
THREAD_ID = "bench"


_ALPHABET = string.ascii_letters + string.digits


# --------------------------------------------------------------------------- worker


def file_content(index: int) -> str:
    """Deterministic pseudo-random ASCII text of `FILE_BYTES` characters for file `index`."""
    rng = random.Random(index)
    return "".join(rng.choices(_ALPHABET, k=FILE_BYTES))


def file_path(index: int) -> str:
    """The virtual path of the `index`-th file the agent writes."""
    return f"/f{index}.txt"


def _make_model(n: int) -> Any:
    """A `ScriptedModel` that writes `n` files, one per agent turn, then answers "done".

    The next file is counted by the policy itself rather than from the `ToolMessage`s in
    the request: deepagents' default summarization (170,000 tokens for a model without a
    profile, reached near N = 340) shortens the messages the model is shown, which would
    restart the count and never end the run. Calls without the `write_file` tool bound
    (deepagents' summary requests) get a plain-text summary and do not advance the count.
    """
    from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

    issued = 0

    def policy(request: ScriptRequest) -> Any:
        nonlocal issued
        if not request.has_tool("write_file"):
            return ai(f"Summary: the agent has written {issued} of {n} files, one per turn.")
        if issued < n:
            args = {"file_path": file_path(issued), "content": file_content(issued)}
            issued += 1
            return ai("", tool_call("write_file", args))
        return ai("done")

    return ScriptedModel(policy=policy)


def _db_bytes(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """(checkpoint bytes, writes bytes, checkpoint rows) for the whole database."""
    checkpoint_bytes, rows = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(CAST(checkpoint AS BLOB))"
        " + LENGTH(CAST(metadata AS BLOB))), 0), COUNT(*) FROM checkpoints"
    ).fetchone()
    (writes_bytes,) = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(CAST(value AS BLOB))), 0) FROM writes"
    ).fetchone()
    return int(checkpoint_bytes), int(writes_bytes), int(rows)


def run_side(side: Side, n: int, db: Path) -> dict[str, Any]:
    """Run one agent of `side` for `n` file writes with a SQLite checkpointer at `db`.

    Returns:
        The measurement: `side`, `n`, `bytes_written`, `checkpoint_bytes`, `writes_bytes`,
        `stored_bytes`, `db_file_bytes`, `checkpoints` (row count), `seconds` (the
        `invoke` call only), `model_calls` and `state_files` (paths in the final `files`,
        which includes anything the harness itself wrote, such as offloaded history).

    Raises:
        RuntimeError: If the final state lacks any of the `n` files.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    if side == "fathom":
        from fathom import create_deep_agent
    else:
        from deepagents import create_deep_agent

    if db.exists():
        db.unlink()
    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:
        model = _make_model(n)
        agent = create_deep_agent(model=model, checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": THREAD_ID}, "recursion_limit": 10_000}
        start = time.perf_counter()
        result = agent.invoke(
            {"messages": [{"role": "user", "content": "Write the files."}]}, config=config
        )
        seconds = time.perf_counter() - start
        files = result.get("files") or {}
        missing = [file_path(i) for i in range(n) if file_path(i) not in files]
        if missing:
            msg = (
                f"{side}: {len(missing)} of {n} files missing from the final state "
                f"(first: {missing[:3]}); the state has {len(files)} files"
            )
            raise RuntimeError(msg)
        checkpoint_bytes, writes_bytes, rows = _db_bytes(conn)
    finally:
        conn.close()
    return {
        "side": side,
        "n": n,
        "bytes_written": n * FILE_BYTES,
        "checkpoint_bytes": checkpoint_bytes,
        "writes_bytes": writes_bytes,
        "stored_bytes": checkpoint_bytes + writes_bytes,
        "db_file_bytes": os.path.getsize(db),
        "checkpoints": rows,
        "seconds": round(seconds, 3),
        "model_calls": model.calls,
        "state_files": len(files),
    }


# --------------------------------------------------------------------------- driver


def _run_worker(side: Side, n: int, python: Path, workdir: Path) -> dict[str, Any]:
    """Run one worker subprocess (its database in `workdir`) and parse its JSON line."""
    db = workdir / f"{side}-{n}.sqlite"
    try:
        return run_worker(__file__, side, ["--n", str(n), "--db", str(db)], python)
    finally:
        db.unlink(missing_ok=True)


def _ratio(row: dict[str, Any] | None) -> float | None:
    if row is None:
        return None
    return float(row["stored_bytes"]) / float(row["bytes_written"])


def _fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}×"


def _table_rows(results: dict[int, dict[Side, dict[str, Any]]]) -> list[list[str]]:
    rows: list[list[str]] = []
    for n, by_side in results.items():
        fathom, ref = by_side.get("fathom"), by_side.get("deepagents")
        f_ratio, r_ratio = _ratio(fathom), _ratio(ref)
        versus = None if f_ratio is None or r_ratio is None else r_ratio / f_ratio
        rows.append(
            [
                str(n),
                _fmt_ratio(f_ratio),
                _fmt_ratio(r_ratio),
                _fmt_ratio(versus),
                "—" if fathom is None else f"{fathom['checkpoints']:,}",
            ]
        )
    return rows


HEADERS = [
    "N",
    "fathom stored/written",
    "deepagents stored/written",
    "deepagents ÷ fathom",
    "fathom checkpoints rows",
]


def print_table(results: dict[int, dict[Side, dict[str, Any]]]) -> None:
    """Print the comparison table."""
    title = f"Checkpoint bytes stored per byte written (N files of {FILE_BYTES:,} bytes)"
    _print_table(title, HEADERS, _table_rows(results))


def _progress(row: dict[str, Any]) -> None:
    print(
        f"  {row['side']:<10} n={row['n']:<4} stored {row['stored_bytes']:>13,} B "
        f"(checkpoints {row['checkpoint_bytes']:,} + writes {row['writes_bytes']:,}), "
        f"db file {row['db_file_bytes']:,} B, {row['checkpoints']:,} rows, "
        f"{row['model_calls']:,} model calls, {row['state_files']:,} files, "
        f"{row['seconds']:.1f} s",
        file=sys.stderr,
        flush=True,
    )


def measure(
    sizes: Sequence[int], ref_python: Path
) -> tuple[dict[int, dict[Side, dict[str, Any]]], list[str]]:
    """Run each available side for every size; the rows by size and side, and the failures."""
    results: dict[int, dict[Side, dict[str, Any]]] = {}
    failures: list[str] = []
    sides = available_sides(ref_python)
    with tempfile.TemporaryDirectory(prefix="fathom-bench-") as tmp:
        for n in sizes:
            results[n] = {}
            for side, python in sides:
                try:
                    row = _run_worker(side, n, python, Path(tmp))
                except SideFailed as exc:
                    failures.append(str(exc))
                    print(str(exc), file=sys.stderr, flush=True)
                    continue
                results[n][side] = row
                _progress(row)
    return results, failures


def collect(ref_python: Path = REF_PYTHON) -> list[Row]:
    """Rows for the combined table: stored bytes per byte written at each N."""
    results, failures = measure(DEFAULT_SIZES, ref_python)
    if failures:
        raise SideFailed("\n".join(failures))
    return [
        Row("Checkpoint growth", f"bytes stored per byte written, N={n}", "×",
            _ratio(by_side.get("fathom")), _ratio(by_side.get("deepagents")),
            note=f"{n} write_file calls of {FILE_BYTES:,} bytes, SqliteSaver")
        for n, by_side in results.items()
    ]


def drive(sizes: Sequence[int], ref_python: Path) -> int:
    """Run both sides for every size and print the table; return the exit status."""
    start = time.perf_counter()
    results, failures = measure(sizes, ref_python)
    print_table(results)
    print(f"total {time.perf_counter() - start:.1f} s")
    if failures:
        print(f"{len(failures)} run(s) failed", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = side_parser(__doc__)
    parser.add_argument("--n", type=int, help="worker: number of files to write")
    parser.add_argument("--db", type=Path, help="worker: SQLite database file to create")
    parser.add_argument(
        "--sizes",
        type=int_list,
        default=list(DEFAULT_SIZES),
        help="driver: comma-separated N values (default: 50,100,200,400)",
    )
    args = parser.parse_args(argv)
    if args.side is None:
        return drive(args.sizes, args.ref_python)
    if args.n is None or args.n < 1 or args.db is None:
        parser.error("--side needs --n (>= 1) and --db")
    print(json.dumps(run_side(args.side, args.n, args.db)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
