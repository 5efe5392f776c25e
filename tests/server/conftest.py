"""Fixtures for the server tests: real servers in subprocesses, and clients for them.

`server` starts one server per test session for each kind in `SERVER_KINDS`, on a free port,
serving the scripted graphs of `deploy/langgraph.json` from a temporary copy of that folder
(so neither server writes into the repository): `fathom serve`, and LangGraph's own
development server `langgraph dev` from its separate virtualenv (`make test` creates it
as `benchmarks/.venv-langgraph-dev`; `FATHOM_LANGGRAPH_DEV` may name another `langgraph`
binary). Every contract test runs once against each, which is the proof that the same
`langgraph.json` and the same client code work on both.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from tests.server.servers import (
    SERVER_KINDS,
    ServerProcess,
    copy_deployment,
    fathom_serve_available,
    langgraph_dev_binary,
)
from tests.server.support import Gate
from tests.system_requirements import needs


@pytest.fixture(scope="session", params=SERVER_KINDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A running server of each kind, shared by the session's contract tests."""
    kind: str = request.param
    if kind == "langgraph-dev" and langgraph_dev_binary() is None:
        pytest.skip(needs("langgraph dev"))
    if kind == "fathom" and not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = copy_deployment(tmp_path_factory.mktemp(f"deploy-{kind}") / "deploy")
    process = ServerProcess(kind=kind, workdir=workdir)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    """A `langgraph-sdk` client for `server`, closed after the test."""
    sdk = get_client(url=server.url, api_key=None)
    try:
        yield sdk
    finally:
        await sdk.http.client.aclose()


@pytest.fixture
def new_gate(tmp_path: Path) -> Iterator[Callable[[], Gate]]:
    """Make fresh `Gate`s; all are released after the test so no run stays stuck."""
    made: list[Gate] = []

    def make() -> Gate:
        gate = Gate(tmp_path / f"gate-{uuid.uuid4().hex[:8]}")
        made.append(gate)
        return gate

    yield make
    for gate in made:
        gate.release()

