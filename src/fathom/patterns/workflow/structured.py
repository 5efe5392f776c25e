"""Ask a chat model for a typed answer, and ask again (a bounded number of times) if it is bad.

The model is called through `with_structured_output(schema, include_raw=True)`, so any
LangChain chat model works whichever way its provider produces structured output. An
answer is accepted only when it parses, validates against the pydantic model and passes
the caller's own checks; otherwise the problems are shown to the model and it answers
again. When the tries run out, `StructuredOutputError` says why; the invalid answer never
reaches the caller as if it were valid.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ValidationError

from fathom.backends.protocol import Plan, adrive, drive
from fathom.errors import FathomError, require_at_least_one

__all__ = ["StructuredCall", "StructuredNode", "StructuredOutputError", "named_config"]

T = TypeVar("T", bound=BaseModel)

_ECHO_CHARS = 2000


class StructuredOutputError(FathomError, RuntimeError):
    """A model gave no valid structured answer within its tries.

    Attributes:
        schema_name: The name of the expected answer type.
        attempts: How many answers were asked for.
        problems: What was wrong with the last answer.
        candidate: The last answer when it parsed but failed the caller's checks, else None.
    """

    def __init__(
        self,
        schema_name: str,
        attempts: int,
        problems: list[str],
        candidate: BaseModel | None,
    ) -> None:
        self.schema_name = schema_name
        self.attempts = attempts
        self.problems = problems
        self.candidate = candidate
        listed = "; ".join(problems)
        super().__init__(f"no valid {schema_name} after {attempts} tries: {listed}")


def named_config(config: RunnableConfig | None, agent_name: str) -> RunnableConfig:
    """`config` with `lc_agent_name` set, so usage and streams attribute calls to `agent_name`."""
    merged: dict[str, Any] = dict(config or {})
    merged["metadata"] = {**(merged.get("metadata") or {}), "lc_agent_name": agent_name}
    return RunnableConfig(**merged)


Validator = Callable[[T], list[str]]
"""Checks beyond the schema: returns the problems found (empty when the answer is fine)."""

OnInvalid = Callable[[int, list[str]], None]
"""Told the attempt number and problems each time an answer is rejected."""


class StructuredCall(Generic[T]):
    """One structured question to a model, with validation and bounded re-asking.

    Args:
        model: The chat model.
        parse_as: The pydantic model answers are validated as.
        agent_name: Recorded as `lc_agent_name` on every call.
        attempts: Answers to ask for at most (at least 1).
        prompt_schema: The schema shown to the model, when it should be stricter than
            `parse_as` (e.g. with enums); defaults to `parse_as`. Answers are still
            validated as `parse_as`, so the caller's checks can explain what is wrong.

    Raises:
        ValueError: `attempts` is below 1.
        NotImplementedError: The model cannot produce structured output.
    """

    def __init__(
        self,
        model: BaseChatModel,
        parse_as: type[T],
        *,
        agent_name: str,
        attempts: int,
        prompt_schema: type[BaseModel] | None = None,
    ) -> None:
        require_at_least_one("attempts", attempts)
        self.parse_as = parse_as
        self.agent_name = agent_name
        self.attempts = attempts
        self.name = (prompt_schema or parse_as).__name__
        self._runnable: Runnable[Any, Any] = model.with_structured_output(
            prompt_schema or parse_as, include_raw=True
        )

    def invoke(
        self,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None = None,
        *,
        validate: Validator[T] | None = None,
        on_invalid: OnInvalid | None = None,
    ) -> T:
        """Ask until an answer passes or the tries run out.

        Raises:
            StructuredOutputError: No valid answer within `attempts`.
        """
        asking = self._asking(messages, config, validate, on_invalid)
        return drive(asking, lambda ask: self._runnable.invoke(*ask))

    async def ainvoke(
        self,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None = None,
        *,
        validate: Validator[T] | None = None,
        on_invalid: OnInvalid | None = None,
    ) -> T:
        """Async `invoke`."""
        asking = self._asking(messages, config, validate, on_invalid)
        return await adrive(asking, lambda ask: self._runnable.ainvoke(*ask))

    # ------------------------------------------------------------------ internals

    def _asking(
        self,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None,
        validate: Validator[T] | None,
        on_invalid: OnInvalid | None,
    ) -> Plan[T]:
        """The ask-and-judge loop, written once: it yields each call's arguments (the
        conversation so far and the run's config) and is sent the model's raw answer; the
        sync and async methods only make the calls."""
        conversation = list(messages)
        run_config = named_config(config, self.agent_name)
        last: tuple[T | None, list[str]] = (None, [])
        for attempt in range(1, self.attempts + 1):
            out = yield conversation, run_config
            last = self._judge(out, validate)
            if not last[1] and last[0] is not None:
                return last[0]
            conversation.append(self._feedback(out, last[1]))
            if on_invalid is not None:
                on_invalid(attempt, last[1])
        raise StructuredOutputError(self.name, self.attempts, last[1], last[0])

    def _judge(self, out: Any, validate: Validator[T] | None) -> tuple[T | None, list[str]]:
        candidate, problems = self._parse(out)
        if candidate is not None and validate is not None:
            problems = validate(candidate)
        return candidate, problems

    def _parse(self, out: Any) -> tuple[T | None, list[str]]:
        raw = out.get("raw") if isinstance(out, dict) else None
        parsed = out.get("parsed") if isinstance(out, dict) else out
        if parsed is not None:
            data = parsed.model_dump() if isinstance(parsed, BaseModel) else parsed
        elif isinstance(raw, AIMessage) and raw.tool_calls:
            # The stricter prompt schema may have refused what `parse_as` accepts; parse
            # the arguments ourselves so the caller's checks can say what is wrong.
            data = raw.tool_calls[0]["args"]
        elif isinstance(out, dict) and out.get("parsing_error") is not None:
            reason = str(out["parsing_error"]).split("\nFor troubleshooting")[0].strip()
            return None, [f"the answer could not be parsed: {reason}"]
        else:
            said = raw.text if isinstance(raw, AIMessage) else repr(raw)
            return None, [
                f"no structured answer: call `{self.name}` with its arguments "
                f"(got plain text: {said[:200]!r})"
            ]
        try:
            return self.parse_as.model_validate(data), []
        except ValidationError as error:
            return None, [
                f"{'.'.join(str(p) for p in item['loc']) or '(answer)'}: {item['msg']}"
                for item in error.errors(include_url=False)
            ]

    def _feedback(self, out: Any, problems: list[str]) -> HumanMessage:
        raw = out.get("raw") if isinstance(out, dict) else None
        if isinstance(raw, AIMessage) and raw.tool_calls:
            echoed = json.dumps(raw.tool_calls[0]["args"], ensure_ascii=False, default=str)
        elif isinstance(raw, AIMessage) and raw.invalid_tool_calls:
            echoed = str(raw.invalid_tool_calls[0].get("args") or "")
        else:
            echoed = raw.text if isinstance(raw, AIMessage) else ""
        listed = "\n".join(f"- {p}" for p in problems)
        text = f"Your answer was not a valid `{self.name}`:\n{listed}\n"
        if echoed:
            text += f"You answered: {echoed[:_ECHO_CHARS]}\n"
        text += f"Answer again by calling `{self.name}` with corrected arguments."
        return HumanMessage(content=text)


class StructuredNode(ABC, Generic[T]):
    """A graph node that asks one structured question, written once for sync and async runs.

    A subclass sets `call` and says what to ask (`_question`: the messages and the
    `validate`/`on_invalid` checks of `StructuredCall.invoke`), what a valid answer makes of
    the state (`_answered`) and what no valid answer within the tries does (`_unanswered`).
    `run` and `arun` are the node's sync and async bodies.
    """

    call: StructuredCall[T]

    @abstractmethod
    def _question(self, state: Any) -> tuple[list[Any], dict[str, Any]]:
        """The messages to send and the `validate`/`on_invalid` keywords of the ask."""

    @abstractmethod
    def _answered(self, state: Any, answer: T, /) -> dict[str, Any]:
        """The state update a valid `answer` makes."""

    @abstractmethod
    def _unanswered(self, state: Any, error: StructuredOutputError) -> dict[str, Any]:
        """The state update when no valid answer came within the tries."""

    def _steps(self, state: Any, config: RunnableConfig) -> Plan[dict[str, Any]]:
        messages, checks = self._question(state)
        try:
            answer = yield from self.call._asking(messages, config, **checks)
        except StructuredOutputError as error:
            return self._unanswered(state, error)
        return self._answered(state, answer)

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Ask, and make the state update of the answer."""
        return drive(self._steps(state, config), lambda ask: self.call._runnable.invoke(*ask))

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Async `run`."""
        steps = self._steps(state, config)
        return await adrive(steps, lambda ask: self.call._runnable.ainvoke(*ask))
