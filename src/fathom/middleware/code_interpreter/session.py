"""Where the interpreter's variables live between `eval` calls: a private state key.

The sandbox session (its globals, functions and imports) is dumped to bytes after each
`eval` that finishes and kept in the agent's state under `SESSION_KEY`, so the thread's
checkpointer saves it with the conversation and a resumed thread keeps its variables.
How long it lives is the `persistence` mode:

- `"thread"`: for the whole thread (every turn sees what earlier turns defined);
- `"turn"`: for one run of the agent (cleared when a new turn starts);
- `"call"`: for one `eval` (nothing is kept).
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr

__all__ = ["PERSISTENCE_MODES", "SESSION_KEY", "CodeInterpreterState", "Persistence"]

Persistence = Literal["thread", "turn", "call"]

PERSISTENCE_MODES: tuple[Persistence, ...] = ("thread", "turn", "call")

SESSION_KEY = "code_interpreter_session"
"""The state key holding the dumped sandbox session (bytes); not in the input or output."""


class CodeInterpreterState(AgentState):
    """The agent state with the interpreter's session."""

    code_interpreter_session: NotRequired[Annotated[bytes | None, PrivateStateAttr]]
