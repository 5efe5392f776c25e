"""No lost update across processes: two "replicas" on one PostgreSQL store.

Each replica is its own store object on its own connection, so the in-process key lock of
`StoreBackend` does not serialise them (as with two `fathom serve` processes); the
conditional put (`fathom.backends.store_cas`) does. The first writer is held by an event
right after it read the item, the second writes meanwhile, then the first goes on.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="needs the postgres extra: pip install 'fathom[postgres]'")
pytest.importorskip("langgraph.store.postgres", reason="needs langgraph-checkpoint-postgres")

from langgraph.store.base import GetOp, Op, Result
from langgraph.store.postgres import PostgresStore
from langgraph.store.postgres.aio import AsyncPostgresStore
from tests import postgres

from fathom.backends import StoreBackend, create_file_data
from fathom.backends.errors import ErrorKind, error_kind
from fathom.backends.versions import ABSENT, expecting

postgres_uri = postgres.postgres_uri  # the fixture, for the tests below
PATH = "/notes.md"
DEADLINE_S = 60.0
"""Bounds a hang only."""


class PausingStore(PostgresStore):
    """A `PostgresStore` that runs `after_get` (once) right after a read of `PATH`."""

    after_get: Callable[[], None] | None = None

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = super().batch(ops)
        hook = self.after_get
        if hook is not None and any(isinstance(op, GetOp) and op.key == PATH for op in ops):
            self.after_get = None
            hook()
        return results


class AsyncPausingStore(AsyncPostgresStore):
    """`PausingStore` for the async store: `after_get` is awaited."""

    after_get: Callable[[], Any] | None = None

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = await super().abatch(ops)
        hook = self.after_get
        if hook is not None and any(isinstance(op, GetOp) and op.key == PATH for op in ops):
            self.after_get = None
            await hook()
        return results


@pytest.fixture
def replicas(postgres_uri: str, request: pytest.FixtureRequest) -> Iterator[list[PostgresStore]]:
    """Two store objects on separate connections to one database, and a fresh namespace."""
    with ExitStack() as stack:
        stores = [stack.enter_context(PausingStore.from_conn_string(postgres_uri))
                  for _ in range(2)]  # fmt: skip
        stores[0].setup()
        yield stores


def namespace_of(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return ("races", request.node.name.replace("[", "-").replace("]", ""))


def test_two_replicas_editing_one_file_keep_both_edits(
    replicas: list[PausingStore], request: pytest.FixtureRequest
) -> None:
    ns = namespace_of(request)
    first_store, second_store = replicas
    first_store.put(ns, PATH, dict(create_file_data("# Notes\n")))
    first = StoreBackend(namespace=ns, store=first_store)
    second = StoreBackend(namespace=ns, store=second_store)
    first_read, second_done = threading.Event(), threading.Event()

    def hold_the_first_edit() -> None:
        first_read.set()
        assert second_done.wait(DEADLINE_S), "the second replica never finished"

    first_store.after_get = hold_the_first_edit
    outcome: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: outcome.update(
            result=first.edit(PATH, "# Notes\n", "# Notes\n- likes tea\n")
        )
    )
    runner.start()
    try:
        assert first_read.wait(DEADLINE_S)
        assert second.edit(PATH, "# Notes\n", "# Notes\n- lives in Lyon\n").error is None
    finally:
        second_done.set()
        runner.join(DEADLINE_S)
    assert outcome["result"].error is None
    item = first_store.get(ns, PATH)
    assert item is not None
    assert item.value["content"] == "# Notes\n- likes tea\n- lives in Lyon\n"


def test_a_replica_does_not_create_a_file_over_another_replicas_new_file(
    replicas: list[PausingStore], request: pytest.FixtureRequest
) -> None:
    ns = namespace_of(request)
    first = StoreBackend(namespace=ns, store=replicas[0])
    second = StoreBackend(namespace=ns, store=replicas[1])
    assert error_kind(first.read(PATH).error) is ErrorKind.NOT_FOUND
    assert second.write(PATH, "- lives in Lyon\n").error is None
    with expecting(ABSENT):
        refused = first.write(PATH, "- likes tea\n")
    assert error_kind(refused.error) is ErrorKind.CHANGED
    item = replicas[0].get(ns, PATH)
    assert item is not None and item.value["content"] == "- lives in Lyon\n"


def test_a_stale_write_on_one_replica_is_refused(
    replicas: list[PausingStore], request: pytest.FixtureRequest
) -> None:
    ns = namespace_of(request)
    first = StoreBackend(namespace=ns, store=replicas[0])
    second = StoreBackend(namespace=ns, store=replicas[1])
    assert first.write(PATH, "v1\n").error is None
    seen = first.read(PATH).version
    assert second.write(PATH, "v2\n").error is None
    with expecting(seen):
        assert error_kind(first.write(PATH, "v3\n").error) is ErrorKind.CHANGED
    assert replicas[0].get(ns, PATH).value["content"] == "v2\n"  # type: ignore[union-attr]


async def test_two_async_replicas_editing_one_file_keep_both_edits(postgres_uri: str) -> None:
    ns = ("races", "async")
    async with (
        AsyncPausingStore.from_conn_string(postgres_uri) as first_store,
        AsyncPausingStore.from_conn_string(postgres_uri) as second_store,
    ):
        await first_store.setup()
        await first_store.aput(ns, PATH, dict(create_file_data("# Notes\n")))
        first = StoreBackend(namespace=ns, store=first_store)
        second = StoreBackend(namespace=ns, store=second_store)
        first_read, second_done = asyncio.Event(), asyncio.Event()

        async def hold_the_first_edit() -> None:
            first_read.set()
            await asyncio.wait_for(second_done.wait(), DEADLINE_S)

        first_store.after_get = hold_the_first_edit
        editing = asyncio.create_task(first.aedit(PATH, "# Notes\n", "# Notes\n- likes tea\n"))
        await asyncio.wait_for(first_read.wait(), DEADLINE_S)
        try:
            other = await second.aedit(PATH, "# Notes\n", "# Notes\n- lives in Lyon\n")
            assert other.error is None
        finally:
            second_done.set()
        assert (await asyncio.wait_for(editing, DEADLINE_S)).error is None
        item = await first_store.aget(ns, PATH)
        assert item is not None
        assert item.value["content"] == "# Notes\n- likes tea\n- lives in Lyon\n"
