"""No lost update in a store: a write's or an edit's read-check-put is one step, and a change
conditioned on a version is refused once another writer has changed the file.

The races are driven with events and lock counters, never with timing: the first writer is
held inside its read of the item until the second writer is seen waiting for the key's lock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from langgraph.store.base import GetOp, Op, Result
from langgraph.store.memory import InMemoryStore

from fathom.backends import StateBackend, StoreBackend, create_file_data
from fathom.backends.errors import ErrorKind, error_kind
from fathom.backends.store import KEY_LOCKS
from fathom.backends.versions import ABSENT, KeyLocks, expecting, file_version

NS = ("user-1", "memories")
PATH = "/notes.md"
DEADLINE_S = 60.0
"""Bounds a hang only; no assertion depends on how long anything takes."""


class PausingStore(InMemoryStore):
    """An `InMemoryStore` that runs `after_get` (once) right after a read of `PATH`."""

    def __init__(self) -> None:
        super().__init__()
        self.after_get: Callable[[], Any] | None = None

    def _hook(self, ops: list[Op]) -> Callable[[], Any] | None:
        if self.after_get is None or not any(
            isinstance(op, GetOp) and op.key == PATH for op in ops
        ):
            return None
        hook, self.after_get = self.after_get, None
        return hook

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = super().batch(ops)
        if (hook := self._hook(ops)) is not None:
            hook()
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = InMemoryStore.batch(self, ops)
        if (hook := self._hook(ops)) is not None:
            await hook()
        return results


def lock_key(store: InMemoryStore) -> tuple[Any, ...]:
    return (id(store), NS, PATH)


def content(store: InMemoryStore) -> str:
    item = store.get(NS, PATH)
    assert item is not None
    return item.value["content"]


def preloaded() -> PausingStore:
    store = PausingStore()
    store.put(NS, PATH, dict(create_file_data("# Notes\n")))
    return store


def test_two_concurrent_edits_of_one_file_both_land() -> None:
    store = preloaded()
    backend = StoreBackend(namespace=NS, store=store)
    first_read, release = threading.Event(), threading.Event()

    def hold_the_first_edit() -> None:
        first_read.set()
        assert release.wait(DEADLINE_S), "the test never released the first edit"

    store.after_get = hold_the_first_edit
    results: dict[str, Any] = {}

    def edit(name: str, fact: str) -> None:
        results[name] = backend.edit(PATH, "# Notes\n", f"# Notes\n- {fact}\n")

    first = threading.Thread(target=edit, args=("first", "likes tea"))
    first.start()
    assert first_read.wait(DEADLINE_S)
    second = threading.Thread(target=edit, args=("second", "lives in Lyon"))
    second.start()
    try:
        deadline = threading.Event()
        for _ in range(int(DEADLINE_S * 100)):  # the second edit waits for the key's lock
            if KEY_LOCKS.users(lock_key(store)) == 2:
                break
            deadline.wait(0.01)
        assert KEY_LOCKS.users(lock_key(store)) == 2
        assert content(store) == "# Notes\n"  # the second edit has not read or written
    finally:
        release.set()
        first.join(DEADLINE_S)
        second.join(DEADLINE_S)
    assert results["first"].error is None and results["second"].error is None
    assert content(store) == "# Notes\n- lives in Lyon\n- likes tea\n"
    assert KEY_LOCKS.users(lock_key(store)) == 0


async def test_two_concurrent_async_edits_of_one_file_both_land() -> None:
    store = preloaded()
    backend = StoreBackend(namespace=NS, store=store)
    first_read, release = asyncio.Event(), asyncio.Event()

    async def hold_the_first_edit() -> None:
        first_read.set()
        await asyncio.wait_for(release.wait(), DEADLINE_S)

    store.after_get = hold_the_first_edit
    first = asyncio.create_task(backend.aedit(PATH, "# Notes\n", "# Notes\n- likes tea\n"))
    await asyncio.wait_for(first_read.wait(), DEADLINE_S)
    second = asyncio.create_task(backend.aedit(PATH, "# Notes\n", "# Notes\n- lives in Lyon\n"))
    for _ in range(int(DEADLINE_S * 100)):
        if KEY_LOCKS.users(lock_key(store)) == 2:
            break
        await asyncio.sleep(0.01)
    assert KEY_LOCKS.users(lock_key(store)) == 2
    assert content(store) == "# Notes\n"
    release.set()
    done = await asyncio.wait_for(asyncio.gather(first, second), DEADLINE_S)
    assert [result.error for result in done] == [None, None]
    assert content(store) == "# Notes\n- lives in Lyon\n- likes tea\n"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_based_on_an_old_version_is_refused_and_writes_nothing(mode: str) -> None:
    store = preloaded()
    backend = StoreBackend(namespace=NS, store=store)
    seen = backend.read(PATH).version
    assert seen == file_version(store.get(NS, PATH).value)  # type: ignore[union-attr]
    other = backend.write(PATH, "# Notes\n- lives in Lyon\n")  # another writer, meanwhile
    assert other.error is None and other.version != seen

    def stale_write() -> Any:
        with expecting(seen):
            if mode == "sync":
                return backend.write(PATH, "# Notes\n- likes tea\n")
            return asyncio.run(backend.awrite(PATH, "# Notes\n- likes tea\n"))

    refused = stale_write()
    assert error_kind(refused.error) is ErrorKind.CHANGED
    assert content(store) == "# Notes\n- lives in Lyon\n"
    with expecting(other.version):
        applied = backend.write(PATH, "# Notes\n- lives in Lyon\n- likes tea\n")
    assert applied.error is None
    assert applied.version == backend.read(PATH).version


def test_a_file_seen_absent_is_not_created_over_another_writers_file() -> None:
    store = PausingStore()
    backend = StoreBackend(namespace=NS, store=store)
    assert error_kind(backend.read(PATH).error) is ErrorKind.NOT_FOUND
    assert backend.write(PATH, "- lives in Lyon\n").error is None  # the other writer
    with expecting(ABSENT):
        refused = backend.write(PATH, "- likes tea\n")
    assert error_kind(refused.error) is ErrorKind.CHANGED
    assert content(store) == "- lives in Lyon\n"


def test_an_edit_conditioned_on_an_old_version_is_refused() -> None:
    store = preloaded()
    backend = StoreBackend(namespace=NS, store=store)
    seen = backend.read(PATH).version
    backend.write(PATH, "# Notes\n- lives in Lyon\n")
    with expecting(seen):
        refused = backend.edit(PATH, "# Notes\n", "# Notes\n- likes tea\n")
    assert error_kind(refused.error) is ErrorKind.CHANGED
    assert content(store) == "# Notes\n- lives in Lyon\n"


def test_state_backend_refuses_a_change_conditioned_on_an_old_version() -> None:
    class Runtime:
        def __init__(self, files: dict[str, Any]) -> None:
            self.state = {"files": files}

    old = create_file_data("v1\n")
    seen = StateBackend(Runtime({PATH: old})).read(PATH).version
    now = StateBackend(Runtime({PATH: create_file_data("v2\n")}))
    with expecting(seen):
        assert error_kind(now.write(PATH, "v3\n").error) is ErrorKind.CHANGED
        assert error_kind(now.edit(PATH, "v2", "v3").error) is ErrorKind.CHANGED
    with expecting(now.read(PATH).version):
        written = now.write(PATH, "v3\n")
    assert written.error is None and written.files_update is not None
    assert written.version == file_version(written.files_update[PATH])  # type: ignore[arg-type]


def test_an_unconditioned_write_replaces_the_file_as_before() -> None:
    store = preloaded()
    backend = StoreBackend(namespace=NS, store=store)
    assert backend.write(PATH, "replaced\n").error is None
    assert content(store) == "replaced\n"


async def test_a_cancelled_waiter_leaves_the_key_lock_usable() -> None:
    locks = KeyLocks()
    entered, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with locks.ahold("k"):
            entered.set()
            await release.wait()

    holding = asyncio.create_task(holder())
    await asyncio.wait_for(entered.wait(), DEADLINE_S)
    waiter = asyncio.create_task(locks.ahold("k").__aenter__())
    for _ in range(int(DEADLINE_S * 100)):
        if locks.users("k") == 2:
            break
        await asyncio.sleep(0.01)
    assert locks.users("k") == 2
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    await asyncio.wait_for(holding, DEADLINE_S)

    async def take() -> bool:
        async with locks.ahold("k"):
            return True

    assert await asyncio.wait_for(take(), DEADLINE_S)
