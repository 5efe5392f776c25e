"""`open_storage`: SQLite under the state folder or a real PostgreSQL, durable across a restart.

The PostgreSQL tests start a throwaway cluster with the fixture of
`tests/backends/test_postgres_store.py` (skipped only where the server binaries or the postgres
extra are missing).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import pytest
from langgraph.graph import START, StateGraph
from tests.system_requirements import needs

from fathom.server.storage import (
    CHECKPOINTS_FILE,
    STORE_FILE,
    StorageError,
    open_storage,
    sqlite_can_index,
)


class State(TypedDict):
    n: int


def _bump(state: State) -> State:
    return {"n": state["n"] + 1}


def _builder() -> StateGraph[State]:
    builder = StateGraph(State)
    builder.add_node("bump", _bump)
    builder.add_edge(START, "bump")
    return builder


async def _write_then_read_after_restart(database: str | None, state_dir: Path) -> None:
    config = {"configurable": {"thread_id": "t-1"}}
    async with open_storage(database, state_dir) as storage:
        graph = _builder().compile(checkpointer=storage.checkpointer, store=storage.store)
        assert await graph.ainvoke({"n": 1}, config) == {"n": 2}
        await storage.store.aput(("memories", "u1"), "fact", {"text": "likes tea"})
    async with open_storage(database, state_dir) as reopened:
        graph = _builder().compile(checkpointer=reopened.checkpointer, store=reopened.store)
        state = await graph.aget_state(config)
        assert state.values == {"n": 2}
        item = await reopened.store.aget(("memories", "u1"), "fact")
        assert item is not None
        assert item.value == {"text": "likes tea"}
        # The thread goes on from its checkpoint.
        assert await graph.ainvoke({"n": state.values["n"]}, config) == {"n": 3}


async def test_default_sqlite_storage_lives_in_the_state_folder_and_survives_a_restart(
    tmp_path: Path,
):
    state_dir = tmp_path / ".fathom"
    await _write_then_read_after_restart(None, state_dir)
    assert (state_dir / CHECKPOINTS_FILE).is_file()
    assert (state_dir / STORE_FILE).is_file()


async def test_a_sqlite_url_puts_the_files_in_its_folder(tmp_path: Path):
    folder = tmp_path / "elsewhere"
    await _write_then_read_after_restart(f"sqlite:///{folder}", tmp_path / ".fathom")
    assert (folder / CHECKPOINTS_FILE).is_file()
    assert not (tmp_path / ".fathom").exists()


async def test_store_ttl_settings_reach_the_store_and_its_sweeper_runs(tmp_path: Path):
    ttl = {"default_ttl": 5, "refresh_on_read": True, "sweep_interval_minutes": 1}
    async with open_storage(None, tmp_path, ttl=ttl) as storage:
        store = storage.store
        assert getattr(store, "ttl_config", None) == ttl
        sweeper = getattr(store, "_ttl_sweeper_thread", None)  # SqliteStore's sweeper thread
        assert sweeper is not None
        assert sweeper.is_alive()
    assert not sweeper.is_alive()


async def test_an_unsupported_database_url_is_a_clear_error(tmp_path: Path):
    with pytest.raises(StorageError, match=r"unsupported --database 'mysql://u:\*\*\*@h/db'"):
        async with open_storage("mysql://u:secret@h/db", tmp_path):
            pass


async def test_an_unwritable_state_folder_is_a_clear_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StorageError, match="cannot create the state folder"):
        async with open_storage(None, blocker / ".fathom"):
            pass


try:
    from tests.backends.test_postgres_store import postgres_uri  # the fixture
except pytest.skip.Exception:  # the postgres extra is not installed
    postgres_uri = None


@pytest.mark.skipif(postgres_uri is None, reason="needs the postgres extra")
async def test_postgres_storage_survives_a_restart(postgres_uri: str, tmp_path: Path):
    await _write_then_read_after_restart(postgres_uri, tmp_path / ".fathom")
    assert not (tmp_path / ".fathom").exists()  # nothing was written locally


@pytest.mark.skipif(postgres_uri is None, reason="needs the postgres extra")
async def test_postgres_storage_describes_itself_without_the_password(postgres_uri: str,
                                                                      tmp_path: Path):  # fmt: skip
    async with open_storage(postgres_uri, tmp_path) as storage:
        assert storage.description.startswith("PostgreSQL at postgresql://")


def _embed(texts: list[str]) -> list[list[float]]:
    """Two dimensions: how much a text is about tea, and about trains."""
    return [[float("tea" in t), float("train" in t)] for t in texts]


@pytest.mark.skipif(not sqlite_can_index(), reason=needs("sqlite extensions"))
async def test_a_store_index_gives_semantic_search_and_survives_a_restart(tmp_path: Path):
    index = {"dims": 2, "embed": _embed, "fields": ["text"]}
    async with open_storage(None, tmp_path, index=index) as storage:
        await storage.store.aput(("notes",), "a", {"text": "she likes tea"})
        await storage.store.aput(("notes",), "b", {"text": "he takes the train"})
    async with open_storage(None, tmp_path, index=index) as reopened:
        found = await reopened.store.asearch(("notes",), query="train times", limit=1)
    assert [item.key for item in found] == ["b"]


@pytest.mark.skipif(sqlite_can_index(), reason="this Python's sqlite3 can load extensions, so "
                    "semantic search runs instead")
async def test_a_store_index_on_sqlite_without_extensions_is_a_clear_error(tmp_path: Path):
    with pytest.raises(StorageError, match="sqlite-vec extension"):
        async with open_storage(None, tmp_path, index={"dims": 2, "embed": _embed}):
            pass
