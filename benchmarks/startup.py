"""Start-up cost: importing the main entry point, and the command line's `--help`.

Each figure is the wall time of a fresh interpreter (a `subprocess.run` of the side's own
Python), the median of 5:

* `import create_deep_agent`: `python -c "from fathom import create_deep_agent"` against
  `python -c "from deepagents import create_deep_agent"`, each minus the median of a bare
  `python -c pass` measured the same way in the same rounds. This is the comparable row:
  both load LangChain, LangGraph and the whole harness.
* `first agent`: the same import, then `create_deep_agent(model)` once (the time to the
  first agent), with LangChain's `GenericFakeChatModel` so that neither side loads a
  provider SDK; minus `python -c pass`. Its CPU time (user + system of the child process,
  `RUSAGE_CHILDREN`) is reported too: on a shared machine it varies less than wall time.
* `floor`: `import langchain.agents` on each side (the same LangChain and LangGraph
  versions on both), which any harness on `create_agent` loads. On fathom's side it is
  `import fathom, langchain.agents`, so that it, too, leaves out httpx's command-line
  module (see `fathom._deferred_httpx_cli`; the reference venv has no click, so there
  httpx skips it anyway).
* `harness's own share`: in one interpreter, the floor first, then the CPU time
  (`time.process_time`) of importing the harness and building the first agent. The floor's
  own variance (seconds on a loaded machine) stays out of it, so this is the steadiest
  comparison of what each harness adds.
* `import fathom`: fathom only. fathom's top-level names are imported lazily, so
  `import fathom` loads almost nothing; it is not comparable with deepagents, whose package
  `__init__` imports the harness.
* `CLI --help`: the console script next to the interpreter, `fathom --help` against
  `deepagents --help`, whole wall time (interpreter start included). The reference
  environment that `make bench` builds has no `deepagents` command (that comes from the
  separate `deepagents-cli` package), and then the deepagents figure is missing.

Before the timed rounds each side runs every command once untimed, so that both read
compiled bytecode from warm caches: the commands run without `PYTHONDONTWRITEBYTECODE`
(so the warm-up can write `__pycache__`), and the deepagents commands without `PYTHONPATH`
(fathom's `src/` is on it only for the other benchmarks' scripted model).

Two modes, as in the other benchmarks:

* Worker: `--side fathom|deepagents [--reps R] [--warmup]` times the commands R times under
  the current interpreter and prints one JSON line of raw timings.
* Driver (no `--side`): runs one warm-up round per side, then 5 timed rounds that alternate
  the sides (each round a fresh worker per side), and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from _harness import FATHOM_PYTHON, REF_PYTHON, Row, SideFailed, median_of, run_worker, side_parser
from _harness import print_table as _print_table

Side = Literal["fathom", "deepagents"]
SIDES: tuple[Side, ...] = ("fathom", "deepagents")

SECTION = "Start-up"
DEFAULT_ROUNDS = 5

ENTRY_CODE: dict[Side, str] = {
    "fathom": "from fathom import create_deep_agent",
    "deepagents": "from deepagents import create_deep_agent",
}
FIRST_AGENT_CODE: dict[Side, str] = {
    side: (
        f"{code}\n"
        "from langchain_core.language_models.fake_chat_models import GenericFakeChatModel\n"
        "create_deep_agent(GenericFakeChatModel(messages=iter([])))"
    )
    for side, code in ENTRY_CODE.items()
}
FLOOR_CODE: dict[Side, str] = {
    "fathom": "import fathom, langchain.agents",
    "deepagents": "import langchain.agents",
}
OWN_CODE: dict[Side, str] = {
    side: (
        f"{FLOOR_CODE[side]}\n"
        "import time\n"
        "from langchain_core.language_models.fake_chat_models import GenericFakeChatModel\n"
        "start = time.process_time()\n"
        f"{ENTRY_CODE[side]}\n"
        "create_deep_agent(GenericFakeChatModel(messages=iter([])))\n"
        "print((time.process_time() - start) * 1000)"
    )
    for side in SIDES
}
PACKAGE_CODE = "import fathom"
CLI_NAME: dict[Side, str] = {"fathom": "fathom", "deepagents": "deepagents"}
CLI_PACKAGE: dict[Side, str] = {"fathom": "fathom", "deepagents": "deepagents-cli"}


# --------------------------------------------------------------------------- worker


def _child_env(side: Side) -> dict[str, str]:
    """The environment for the timed commands (see the module docstring)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if side == "deepagents":
        env.pop("PYTHONPATH", None)
    return env


def _time_ms(cmd: Sequence[str], env: dict[str, str]) -> float:
    """Wall milliseconds of one run of `cmd`.

    Raises:
        RuntimeError: If the command exits non-zero.
    """
    return _time_wall_cpu_ms(cmd, env)[0]


def _printed_ms(cmd: Sequence[str], env: dict[str, str]) -> float:
    """The number of milliseconds `cmd` prints on its last line.

    Raises:
        RuntimeError: If the command exits non-zero.
    """
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        raise RuntimeError(f"{cmd[0]} -c ... exited {proc.returncode}:\n{tail}")
    return float(proc.stdout.strip().splitlines()[-1])


def _time_wall_cpu_ms(cmd: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) milliseconds of one run of `cmd`.

    Raises:
        RuntimeError: If the command exits non-zero.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        msg = f"{' '.join(cmd)} exited {proc.returncode}:\n{tail}"
        raise RuntimeError(msg)
    return elapsed, cpu


def _cli_version(side: Side) -> str | None:
    """The installed version of the package that provides the side's command, if any."""
    from importlib import metadata

    try:
        return metadata.version(CLI_PACKAGE[side])
    except metadata.PackageNotFoundError:
        return None


def run_side(side: Side, reps: int, warmup: bool = False) -> dict[str, Any]:
    """Time the start-up commands of `side` `reps` times under this interpreter.

    Returns:
        `side`, `python` (this interpreter), `pass_ms`, `entry_ms` and, for fathom,
        `package_ms` (raw wall milliseconds per rep, interpreter start included),
        `help_ms` (per rep, or `None` when the command is missing), `cli` (the command's
        path or `None`) and `cli_package` ("name version" or `None`).

    Raises:
        RuntimeError: If a command exits non-zero.
    """
    python = sys.executable
    env = _child_env(side)
    cli = Path(python).parent / CLI_NAME[side]
    has_cli = cli.is_file() and os.access(cli, os.X_OK)
    commands: dict[str, list[str]] = {
        "pass_ms": [python, "-c", "pass"],
        "entry_ms": [python, "-c", ENTRY_CODE[side]],
        "first_agent_ms": [python, "-c", FIRST_AGENT_CODE[side]],
        "floor_ms": [python, "-c", FLOOR_CODE[side]],
    }
    if side == "fathom":
        commands["package_ms"] = [python, "-c", PACKAGE_CODE]
    if has_cli:
        commands["help_ms"] = [str(cli), "--help"]
    if warmup:
        for cmd in commands.values():
            _time_ms(cmd, env)
    timings: dict[str, list[float]] = {key: [] for key in commands}
    for key in ("pass", "first_agent"):
        timings[f"{key}_cpu_ms"] = []
    timings["own_cpu_ms"] = []
    for _ in range(reps):
        for key, cmd in commands.items():
            wall, cpu = _time_wall_cpu_ms(cmd, env)
            timings[key].append(round(wall, 3))
            if f"{key.removesuffix('_ms')}_cpu_ms" in timings:
                timings[f"{key.removesuffix('_ms')}_cpu_ms"].append(round(cpu, 3))
        timings["own_cpu_ms"].append(round(_printed_ms([python, "-c", OWN_CODE[side]], env), 3))
    version = _cli_version(side) if has_cli else None
    return {
        "side": side,
        "python": python,
        **timings,
        "help_ms": timings.get("help_ms"),
        "cli": str(cli) if has_cli else None,
        "cli_package": f"{CLI_PACKAGE[side]} {version}" if version else None,
    }


# --------------------------------------------------------------------------- driver


def run_all(
    ref_python: Path = REF_PYTHON, rounds: int = DEFAULT_ROUNDS
) -> dict[Side, dict[str, Any]]:
    """A warm-up round per side, then `rounds` timed rounds alternating the sides.

    Returns:
        Per side, the worker's fields with the timing lists joined over all rounds. The
        deepagents side is absent when `ref_python` does not exist.

    Raises:
        SideFailed: If a worker fails.
    """
    fathom_python = FATHOM_PYTHON if FATHOM_PYTHON.exists() else Path(sys.executable)
    pythons: dict[Side, Path] = {"fathom": fathom_python}
    if ref_python.exists():
        pythons["deepagents"] = ref_python
    merged: dict[Side, dict[str, Any]] = {}
    for side, python in pythons.items():
        run_worker(__file__, side, ["--reps", "0", "--warmup"], python)
    for _ in range(rounds):
        for side, python in pythons.items():
            row = run_worker(__file__, side, ["--reps", "1"], python)
            if side not in merged:
                merged[side] = row
                continue
            into = merged[side]
            for key, value in row.items():
                if key.endswith("_ms") and value is not None:
                    into[key] = [*into[key], *value]
    for row in merged.values():
        _progress(row)
    return merged


def _progress(row: dict[str, Any]) -> None:
    def med(key: str) -> str:
        values = row.get(key)
        return "—" if not values else f"{median_of(values):.0f} ms"

    print(
        f"  {row['side']:<10} python -c pass {med('pass_ms')}, create_deep_agent import "
        f"{med('entry_ms')}, first agent {med('first_agent_ms')} "
        f"(CPU {med('first_agent_cpu_ms')}), import fathom {med('package_ms')}, "
        f"--help {med('help_ms')} "
        f"({row['cli_package'] or 'no command'}); raw medians of {len(row['pass_ms'])}",
        file=sys.stderr,
        flush=True,
    )


def _net(row: dict[str, Any] | None, key: str) -> float | None:
    """Median of `key` minus the median bare-interpreter start, or `None`."""
    if row is None or not row.get(key):
        return None
    return median_of(row[key]) - median_of(row["pass_ms"])


def _net_cpu(row: dict[str, Any] | None) -> float | None:
    """Median CPU of the first-agent command minus the median CPU of `python -c pass`."""
    if row is None or not row.get("first_agent_cpu_ms"):
        return None
    return median_of(row["first_agent_cpu_ms"]) - median_of(row["pass_cpu_ms"])


def _own(row: dict[str, Any] | None) -> float | None:
    """Median CPU of importing the harness and building one agent, LangChain loaded first."""
    if row is None or not row.get("own_cpu_ms"):
        return None
    return median_of(row["own_cpu_ms"])


def _raw(row: dict[str, Any] | None, key: str) -> float | None:
    if row is None or not row.get(key):
        return None
    return median_of(row[key])


def rows_from(results: dict[Side, dict[str, Any]], rounds: int = DEFAULT_ROUNDS) -> list[Row]:
    """The combined-table rows for `results` (as returned by `run_all`)."""
    fathom, ref = results.get("fathom"), results.get("deepagents")
    runs = f"median of {rounds} fresh interpreters"
    missing = "" if ref is not None else "; no reference env"
    if ref is None:
        help_note = f"`fathom --help` wall time, {runs}; no reference env"
    elif ref.get("cli") is None:
        help_note = (
            f"`fathom --help` wall time, {runs}; the reference env has no `deepagents` "
            "command (package deepagents-cli is not installed)"
        )
    else:
        help_note = (
            f"wall time incl. interpreter, {runs}; deepagents: `deepagents --help` from "
            f"{ref['cli_package']} (its deployment commands, not an interactive agent)"
        )
    return [
        Row(
            SECTION,
            "import create_deep_agent",
            "ms",
            _net(fathom, "entry_ms"),
            _net(ref, "entry_ms"),
            note=f"`from <pkg> import create_deep_agent` minus `python -c pass`, {runs}{missing}",
        ),
        Row(
            SECTION,
            "first agent: import + create_deep_agent",
            "ms",
            _net(fathom, "first_agent_ms"),
            _net(ref, "first_agent_ms"),
            note=(
                "the import, then one `create_deep_agent(GenericFakeChatModel(...))`, wall "
                f"time minus `python -c pass`, {runs}{missing}"
            ),
        ),
        Row(
            SECTION,
            "first agent, CPU",
            "ms",
            _net_cpu(fathom),
            _net_cpu(ref),
            note=f"user + system CPU of the same command minus `python -c pass`, {runs}",
        ),
        Row(
            SECTION,
            "floor: import langchain.agents",
            "ms",
            _net(fathom, "floor_ms"),
            _net(ref, "floor_ms"),
            note=(
                "what both sides load before any harness code (LangChain, LangGraph, "
                f"langsmith), minus `python -c pass`, {runs}"
            ),
        ),
        Row(
            SECTION,
            "harness's own share: import + first agent, CPU",
            "ms",
            _own(fathom),
            _own(ref),
            note=(
                "process CPU of the harness import and one create_deep_agent, in an "
                f"interpreter that has loaded the floor first, {runs}"
            ),
        ),
        Row(
            SECTION,
            "import fathom (lazy names)",
            "ms",
            _net(fathom, "package_ms"),
            None,
            note=(
                "fathom only: `import fathom` defers LangChain until a name is used; "
                "the comparable row is import create_deep_agent"
            ),
        ),
        Row(
            SECTION,
            "CLI --help",
            "ms",
            _raw(fathom, "help_ms"),
            _raw(ref, "help_ms"),
            note=help_note,
        ),
    ]


def collect(ref_python: Path = REF_PYTHON) -> list[Row]:
    """Run both sides (a warm-up, then 5 alternating rounds) and return the table rows.

    Without the reference environment the deepagents figures are `None`.

    Raises:
        SideFailed: If a worker fails.
    """
    return rows_from(run_all(ref_python))


def show(rows: Sequence[Row], title: str) -> None:
    """Print `rows` as a table with the deepagents ÷ fathom ratio and the notes."""
    headers = ["metric", "unit", "fathom", "deepagents", "deepagents ÷ fathom", "better"]
    cells = [
        [
            row.metric,
            row.unit,
            "—" if row.fathom is None else f"{row.fathom:,.0f}",
            "—" if row.deepagents is None else f"{row.deepagents:,.0f}",
            "—" if row.ratio is None else f"{row.ratio:.2f}×",
            row.winner or "—",
        ]
        for row in rows
    ]
    notes = "\n".join(f"{row.metric}: {row.note}" for row in rows if row.note)
    _print_table(title, headers, cells, notes)


# --------------------------------------------------------------------------- CLI


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an int: {text!r}") from exc
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = side_parser(__doc__)
    parser.add_argument("--reps", type=_count, default=1, help="worker: timed repetitions")
    parser.add_argument("--warmup", action="store_true", help="worker: one untimed run first")
    parser.add_argument(
        "--rounds",
        type=_count,
        default=DEFAULT_ROUNDS,
        help="driver: timed rounds per side (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.side is not None:
        print(json.dumps(run_side(args.side, args.reps, args.warmup)), flush=True)
        return 0
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not args.ref_python.exists():
        print(
            f"Reference environment not found ({args.ref_python}); showing fathom only. "
            "Create it with `make bench`, or pass --ref-python.",
            file=sys.stderr,
        )
    start = time.perf_counter()
    try:
        results = run_all(args.ref_python, args.rounds)
    except SideFailed as exc:
        print(str(exc), file=sys.stderr)
        return 1
    show(rows_from(results, args.rounds), "Start-up: fresh interpreter wall time")
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
