"""`fathom.tracing.inline_hops`: LangSmith's untraced bookkeeping stays on the event loop."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator

import pytest
from langsmith import tracing_context
from langsmith._internal import _aiter

from fathom.tracing import inline_hops


@pytest.fixture
def installed() -> Iterator[None]:
    inline_hops.install()
    try:
        yield
    finally:
        inline_hops.uninstall()


def _thread_name() -> str:
    return threading.current_thread().name


async def test_untraced_work_runs_on_the_loop_thread(installed: None) -> None:
    with tracing_context(enabled=False):
        ctx = contextvars.copy_context()
    ran_on = await _aiter.aio_to_thread(ctx, _thread_name)
    assert ran_on == threading.current_thread().name


async def test_traced_work_keeps_langsmith_s_thread_hand_off(installed: None) -> None:
    with tracing_context(enabled=True):
        ctx = contextvars.copy_context()
    ran_on = await _aiter.aio_to_thread(ctx, _thread_name)
    assert ran_on != threading.current_thread().name


async def test_untraced_work_sees_and_keeps_its_context(installed: None) -> None:
    """The function runs inside the context it was given, and its changes stay there."""
    var: contextvars.ContextVar[int] = contextvars.ContextVar("var", default=0)
    ctx = contextvars.copy_context()
    await _aiter.aio_to_thread(ctx, var.set, 5)
    assert ctx[var] == 5
    assert var.get() == 0


async def test_uninstall_restores_the_thread_hand_off() -> None:
    inline_hops.install()
    inline_hops.uninstall()
    with tracing_context(enabled=False):
        ctx = contextvars.copy_context()
    ran_on = await _aiter.aio_to_thread(ctx, _thread_name)
    assert ran_on != threading.current_thread().name
