"""`benchmarks/server.py` measures real servers: a tiny run against `fathom serve` (and
`langgraph dev` when its environment exists), the rows, the table and the JSON, and the split
of cores between the server and the load generator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.system_requirements import needs

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def server() -> ModuleType:
    return load_benchmark("server")


@pytest.fixture(scope="module")
def tiny(server: ModuleType) -> Any:
    return server.Settings(warmup=1, sequential=3, concurrent=6, clients=3, streams=2, jobs=2)


@pytest.fixture(scope="module")
def pinning(server: ModuleType) -> Any:
    """The benchmark's default split of this machine's cores (`None` on one core)."""
    return server.plan_pinning(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def fathom_row(server: ModuleType, tiny: Any, pinning: Any) -> dict[str, Any]:
    row: dict[str, Any] = server.run_side("fathom", tiny, pinning)
    return row


def test_fathom_side_measures_every_figure(fathom_row: dict[str, Any], tiny: Any) -> None:
    row = fathom_row
    assert row["kind"] == "fathom" and row["jobs"] == 2
    assert row["command"][1:3] == ["serve", "--config"] and row["command"][-2:] == ["--jobs", "2"]
    assert len(row["latency_ms"]) == tiny.sequential and all(v > 0 for v in row["latency_ms"])
    assert 0 < row["p50_ms"] <= row["p99_ms"] == pytest.approx(max(row["latency_ms"]), abs=0.01)
    assert row["runs_per_s"] == pytest.approx(tiny.concurrent / row["concurrent_s"])
    assert row["cpu_ms_per_run"] > 0  # a run through HTTP and a graph costs the server CPU
    assert row["client_cpu_ms_per_run"] > 0 and row["machine_cpu_ms_per_run"] > 0
    # `/proc` counts in clock ticks: over a batch this short, one tick more or less is 0.1 core
    assert 0 <= row["other_cores"] <= (os.cpu_count() or 1) + 1
    assert len(row["first_event_ms"]) == tiny.streams
    assert 0 < row["first_event_p50_ms"] <= row["stream_total_p50_ms"]
    # The whole tree of a Python server holding LangChain and LangGraph is tens of MiB.
    assert row["rss_mib"] > 20 and row["idle_rss_mib"] > 20


def test_fathom_side_ran_on_the_cores_it_was_given(
    fathom_row: dict[str, Any], pinning: Any
) -> None:
    everywhere = sorted(os.sched_getaffinity(0))
    if pinning is None:
        assert fathom_row["server_cores"] == fathom_row["client_cores"] == everywhere
    else:
        assert fathom_row["server_cores"] == list(pinning.server)
        assert fathom_row["client_cores"] == list(pinning.client)
    assert sorted(os.sched_getaffinity(0)) == everywhere  # the client's pinning was undone


def test_rows_table_and_json_from_fathom_alone(
    server: ModuleType, fathom_row: dict[str, Any], tiny: Any, tmp_path: Path
) -> None:
    results = {"fathom": fathom_row}
    rows = server.rows_from(results, tiny)
    assert [r.metric for r in rows] == [
        "create-to-done latency, p50",
        "create-to-done latency, p99",
        "throughput, 3 concurrent clients",
        "server CPU per run, 3 concurrent clients",
        "time to first SSE event, p50",
        "server RSS after the load",
    ]
    assert all(r.fathom is not None and r.fathom > 0 and r.deepagents is None for r in rows)
    assert rows[2].better == "higher" and "not installed" in rows[0].note
    printed = server.table(results, tiny)
    assert printed[0][3] == "—" and printed[0][4] == "—" and printed[0][5] == "—"
    path = server.write_results(results, tiny, 1.0, tmp_path / "server.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["settings"]["jobs"] == 2 and data["results"]["fathom"]["p50_ms"] > 0
    assert data["fathom_over_langgraph_dev"] == {}


def test_ratios_and_goals(server: ModuleType, tiny: Any) -> None:
    def side(p50: float, runs: float) -> dict[str, float]:
        return {"p50_ms": p50, "p99_ms": p50 * 2, "runs_per_s": runs, "cpu_ms_per_run": 8.0,
                "first_event_p50_ms": 5.0, "rss_mib": 100.0}  # fmt: skip

    results = {"fathom": side(40.0, 30.0), "langgraph dev": side(100.0, 10.0)}
    printed = {cells[0]: cells for cells in server.table(results, tiny)}
    assert printed["create-to-done latency, p50"][4:] == ["0.40×", "<= 0.5×: met"]
    assert printed["throughput, 3 concurrent clients"][4:] == ["3.00×", ">= 2×: met"]
    results["fathom"] = side(60.0, 15.0)
    printed = {cells[0]: cells for cells in server.table(results, tiny)}
    assert printed["create-to-done latency, p50"][5] == "<= 0.5×: missed"
    assert printed["throughput, 3 concurrent clients"][5] == ">= 2×: missed"
    rows = server.rows_from(results, tiny)
    assert rows[0].ratio == pytest.approx(100 / 60) and rows[0].winner == "fathom"
    assert rows[2].ratio == pytest.approx(10 / 15) and rows[2].winner == "fathom"


def test_pinning_gives_the_client_the_last_core_and_the_server_the_rest(
    server: ModuleType,
) -> None:
    assert server.plan_pinning({1, 0}) == server.Pinning(server=(0,), client=(1,))
    assert server.plan_pinning([5, 0, 3, 1]) == server.Pinning(server=(0, 1, 3), client=(5,))
    assert server.plan_pinning({0}) is None  # nothing to split
    assert server.plan_pinning({0, 1}, enabled=False) is None
    assert server.parse_args([]).pin and not server.parse_args(["--no-pin"]).pin
    words = server.pinning_words(server.Pinning(server=(0, 1), client=(2,)))
    assert words == "every side pinned: server on cores 0,1, client on 2"
    assert server.pinning_words(None).startswith("not pinned")


def test_the_results_file_says_which_cores_each_got(
    server: ModuleType, tiny: Any, tmp_path: Path
) -> None:
    split = server.Pinning(server=(0,), client=(1,))
    path = server.write_results({}, tiny, 1.0, tmp_path / "pinned.json", split)
    assert json.loads(path.read_text(encoding="utf-8"))["pinning"] == {
        "server": [0],
        "client": [1],
    }
    path = server.write_results({}, tiny, 1.0, tmp_path / "free.json")
    assert json.loads(path.read_text(encoding="utf-8"))["pinning"] is None


def test_pin_tree_reaches_every_process_of_the_tree(server: ModuleType) -> None:
    core = min(os.sched_getaffinity(0))
    parent = subprocess.Popen([sys.executable, "-c", CHILD_TREE], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())  # the child already runs
        server.pin_tree(parent.pid, {core})
        assert os.sched_getaffinity(parent.pid) == os.sched_getaffinity(child_pid) == {core}
        assert server.tree_cores(parent.pid) == [core]
    finally:
        parent.communicate("", timeout=60)


def test_pinned_self_moves_threads_already_running_and_puts_them_back(
    server: ModuleType,
) -> None:
    everywhere = os.sched_getaffinity(0)
    core = max(everywhere)
    release = threading.Event()
    other = threading.Thread(target=release.wait, args=(60,))
    other.start()
    try:
        assert other.native_id is not None
        with server.pinned_self([core]):
            assert os.sched_getaffinity(0) == os.sched_getaffinity(other.native_id) == {core}
        assert os.sched_getaffinity(0) == os.sched_getaffinity(other.native_id) == everywhere
        with server.pinned_self(None):
            assert os.sched_getaffinity(0) == everywhere
    finally:
        release.set()
        other.join(timeout=60)


def test_percentile_is_nearest_rank(server: ModuleType) -> None:
    values = [float(v) for v in range(1, 101)]
    assert server.percentile(values, 0.99) == 99.0
    assert server.percentile(values, 0.5) == 50.0
    assert server.percentile([7.0], 0.99) == 7.0


CHILD_TREE = """
import subprocess, sys
code = 'import sys; print("ready", flush=True); sys.stdin.read()'
child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
child.stdout.readline()
print(child.pid, flush=True)
sys.stdin.read()
child.communicate("")
"""
"""A Python that starts a child Python, prints the child's pid once it runs, and waits."""


def test_tree_rss_adds_up_the_whole_process_tree(server: ModuleType) -> None:
    parent = subprocess.Popen([sys.executable, "-c", CHILD_TREE], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        both = _own_rss(parent.pid) + _own_rss(child_pid)
        assert server.tree_rss_mib(parent.pid) == pytest.approx(both, abs=1.0)
        assert server.tree_rss_mib(parent.pid) > _own_rss(parent.pid) + 1
    finally:
        parent.communicate("", timeout=60)


BUSY_CHILD = """
import subprocess, sys
code = ('import sys\\n'
        'while sys.stdin.readline().strip() == "spin":\\n'
        '    sum(range(3_000_000))\\n'
        '    print("spun", flush=True)')
child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
print(child.pid, flush=True)
for line in sys.stdin:
    child.stdin.write(line)
    child.stdin.flush()
    if line.strip() == "spin":
        print(child.stdout.readline().strip(), flush=True)
child.communicate("")
"""
"""A Python that passes its input to a child Python, which burns CPU on each `spin` line."""


def test_tree_cpu_counts_the_children(server: ModuleType) -> None:
    parent = subprocess.Popen([sys.executable, "-c", BUSY_CHILD], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert parent.stdin is not None and parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        before_tree, before_child = server.tree_cpu_s(parent.pid), server.tree_cpu_s(child_pid)
        for _ in range(5):
            parent.stdin.write("spin\n")
            parent.stdin.flush()
            assert parent.stdout.readline().strip() == "spun"
        child_used = server.tree_cpu_s(child_pid) - before_child
        assert child_used > 0.05  # five sums over 3,000,000 numbers
        tree_used = server.tree_cpu_s(parent.pid) - before_tree
        assert tree_used >= child_used - 1e-9  # both are whole clock ticks: only float rounding
    finally:
        parent.communicate("", timeout=60)


def _own_rss(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
        line = next(line for line in handle if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def test_both_servers_when_langgraph_dev_is_installed(server: ModuleType, tiny: Any) -> None:
    if server.langgraph_dev_binary() is None:
        pytest.skip(needs("langgraph dev"))
    split = server.plan_pinning(os.sched_getaffinity(0))
    results = server.run_all(tiny, pinning=split)
    assert set(results) == {"fathom", "fathom (memory)", "langgraph dev"}
    if split is not None:  # every side on the same cores
        assert all(r["server_cores"] == list(split.server) for r in results.values())
        assert all(r["client_cores"] == list(split.client) for r in results.values())
    assert results["fathom (memory)"]["command"][-4:] == ["--database", "memory", "--jobs", "2"]
    ref = results["langgraph dev"]
    assert ref["command"][1] == "dev" and "--n-jobs-per-worker" in ref["command"]
    assert ref["p50_ms"] > 0 and ref["runs_per_s"] > 0 and ref["rss_mib"] > 20
    rows = server.rows_from(results, tiny)
    assert all(r.ratio is not None for r in rows)
