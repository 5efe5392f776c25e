"""`fathom.tool_answers`: failed tool answers, and the boundary where a failure is an answer."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.errors import GraphInterrupt

from fathom.errors import FathomError
from fathom.tool_answers import Failure, aattempt, attempt, exception_text, tool_error


def boom() -> int:
    raise KeyError("missing")


def test_a_failed_answer_is_an_error_tool_message() -> None:
    message = tool_error("Error: no such file", tool_call_id="call-1", name="read_file")
    assert (message.status, message.tool_call_id, message.name) == ("error", "call-1", "read_file")


def test_exceptions_are_worded_by_type_unless_they_are_fathoms_own() -> None:
    assert exception_text(KeyError("missing")) == "KeyError: 'missing'"
    assert exception_text(FathomError("the path is outside the root")) == (
        "the path is outside the root"
    )


def test_attempt_answers_the_value_or_the_failure() -> None:
    assert attempt(lambda: 3, "three") == 3
    failed = attempt(boom, "boom")
    assert isinstance(failed, Failure)
    assert failed.text == "KeyError: 'missing'"


def test_interrupts_pass_through_attempt() -> None:
    def ask() -> None:
        raise GraphInterrupt(())

    with pytest.raises(GraphInterrupt):
        attempt(ask, "ask")


async def test_aattempt_answers_failures_and_lets_cancellation_through() -> None:
    async def fails() -> None:
        raise ValueError("bad")

    failed = await aattempt(fails(), "fails")
    assert isinstance(failed, Failure) and failed.text == "ValueError: bad"

    async def cancelled() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await aattempt(cancelled(), "cancelled")
