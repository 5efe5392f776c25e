"""Async-only doubles that prove an async run never blocks on a sync backend or store call.

An agent run with `ainvoke`/`astream` should reach its backend only through the async API
(`als`, `aread`, `awrite`, ...): a sync call from the event loop blocks every other run on
that loop, and stores with only an async API (LangGraph's `AsyncPostgresStore`) refuse it.
These doubles make such a call fail loudly and leave a record of it:

```python
calls = SyncCallLog()
store = AsyncOnlyStore(InMemoryStore(), calls)
backend = AsyncOnlyBackend(StoreBackend(store=store, namespace=("files",)), calls)
agent = create_deep_agent(model, backend=backend, store=store)
await agent.ainvoke(...)
assert not calls  # nothing on the way used a sync method
```
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import BaseStore, Op, Result

from fathom.errors import FathomError

__all__ = ["AsyncOnlyBackend", "AsyncOnlyStore", "SyncCall", "SyncCallError", "SyncCallLog"]


class SyncCallError(FathomError, RuntimeError):
    """A sync method of an async-only double was called."""


@dataclass(frozen=True)
class SyncCall:
    """One refused sync call: what was called, and the stack that called it."""

    name: str
    stack: str


class SyncCallLog:
    """The sync calls the doubles refused, in order (empty when the run was async-clean).

    The log is kept besides raising because a caller may catch the error and carry on
    (for example by turning it into an error message for the model).
    """

    def __init__(self) -> None:
        self.calls: list[SyncCall] = []

    def refuse(self, name: str) -> SyncCallError:
        """Record a call of the sync method `name` and return the error to raise."""
        self.calls.append(SyncCall(name, "".join(traceback.format_stack(limit=12)[:-1])))
        return SyncCallError(f"sync {name}() called where only the async API may be used")

    def __len__(self) -> int:
        return len(self.calls)

    def __iter__(self) -> Iterator[SyncCall]:
        return iter(self.calls)

    def __repr__(self) -> str:
        if not self.calls:
            return "SyncCallLog(no sync calls)"
        return "SyncCallLog(\n" + "\n".join(f"{c.name}:\n{c.stack}" for c in self.calls) + ")"


class AsyncOnlyStore(BaseStore):
    """A LangGraph store with only the async API, over another store.

    `abatch` is the wrapped store's; `batch` (through which every sync method of
    `BaseStore` — `get`, `put`, `search`, `delete`, ... — goes) is refused and logged.
    """

    def __init__(self, inner: BaseStore, log: SyncCallLog | None = None) -> None:
        self.inner = inner
        self.log = log if log is not None else SyncCallLog()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        raise self.log.refuse("store.batch")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.inner.abatch(ops)


_ALWAYS_ALLOWED = frozenset({"bind"})


class AsyncOnlyBackend:
    """A backend whose sync file methods are refused (and logged); async ones pass through.

    Every attribute of the wrapped backend is available. A method is refused when it has
    an async twin (`read` next to `aread`, `execute` next to `aexecute`, ...); async
    methods are the wrapped backend's own; `bind` wraps the bound backend again. So the
    double follows whatever operations the wrapped backend has.
    """

    def __init__(self, inner: Any, log: SyncCallLog | None = None) -> None:
        self._inner = inner
        self.log = log if log is not None else SyncCallLog()

    @property
    def inner(self) -> Any:
        """The wrapped backend."""
        return self._inner

    def bind(self, runtime: Any) -> AsyncOnlyBackend:
        """The wrapped backend bound to `runtime`, wrapped again with the same log."""
        bind = getattr(self._inner, "bind", None)
        return AsyncOnlyBackend(bind(runtime) if bind else self._inner, self.log)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in _ALWAYS_ALLOWED or name.startswith("_") or not callable(value):
            return value
        if inspect.iscoroutinefunction(value):
            return value
        twin = getattr(self._inner, f"a{name}", None)
        if twin is not None and inspect.iscoroutinefunction(twin):

            def refused(*args: Any, **kwargs: Any) -> Any:
                raise self.log.refuse(f"backend.{name}")

            return refused
        return value

    def __repr__(self) -> str:
        return f"AsyncOnlyBackend({self._inner!r})"
