"""The limits of one `eval` call, and the messages the model gets when code breaks them.

Time and memory are enforced inside the Monty sandbox (`ResourceLimits`); the number of
host calls (`task()` and `tools.<name>()`) and their concurrency are counted here, on the
host side, because a Monty snapshot restored after a human approval starts its own count
afresh and the sandbox has no semaphore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fathom.errors import FathomError

__all__ = ["CodeInterpreterLimits", "HostCallLimitError", "describe_failure"]


@dataclass(frozen=True)
class CodeInterpreterLimits:
    """What one `eval` call may use.

    Attributes:
        timeout_s: Seconds of sandboxed execution per `eval` (time spent waiting for
            subagents and tools does not count).
        max_memory_bytes: Heap the code may allocate.
        max_host_calls: `task()` and `tools.<name>()` calls per `eval`.
        max_concurrency: Subagents and tools running at the same time for one `eval`.
        max_recursion_depth: Nested function calls in the code.
        max_result_chars: The tool result (printed output and value) is clipped to this.
    """

    timeout_s: float = 30.0
    max_memory_bytes: int = 256 * 1024 * 1024
    max_host_calls: int = 1000
    max_concurrency: int = 32
    max_recursion_depth: int = 200
    max_result_chars: int = 20_000

    def __post_init__(self) -> None:
        for name in ("timeout_s", "max_memory_bytes", "max_host_calls", "max_concurrency",
                     "max_recursion_depth", "max_result_chars"):
            if getattr(self, name) <= 0:
                raise ValueError(f"CodeInterpreterLimits.{name} must be positive.")

    def resource_limits(self) -> dict[str, Any]:
        """Monty's `ResourceLimits` for these limits.

        Monty counts every suspension (imports, name lookups, future resolutions) against
        `max_suspensions`, so it gets room above `max_host_calls`; the exact count of host
        calls is kept by the host.
        """
        return {
            "max_feed_duration_secs": self.timeout_s,
            "max_memory": self.max_memory_bytes,
            "max_recursion_depth": self.max_recursion_depth,
            "max_suspensions": 4 * self.max_host_calls + 100,
        }


class HostCallLimitError(FathomError):
    """The code called `task()` / `tools.<name>()` more often than one `eval` allows."""


def describe_failure(error: BaseException, limits: CodeInterpreterLimits) -> str:
    """The tool error for code that did not finish: the cause, and what to do about it."""
    if isinstance(error, HostCallLimitError):
        return str(error)
    from pydantic_monty import MontySyntaxError

    if isinstance(error, MontySyntaxError):
        return f"SyntaxError: {error.display('msg')}. Fix the code and call eval again."
    monty: Any = error
    inner = monty.exception() if hasattr(monty, "exception") else error
    kind = type(inner).__name__
    text = monty.display("type-msg") if hasattr(monty, "display") else f"{kind}: {error}"
    if kind == "TimeoutError":
        return (f"{text}. The code ran longer than the {limits.timeout_s:g} s limit of one "
                "eval (an endless loop?). Make it do less per call.")
    if kind == "MemoryError":
        return (f"{text}. The code allocated more than the {limits.max_memory_bytes:,} byte "
                "memory limit of one eval. Work on smaller pieces.")
    if "suspension limit" in text:
        return (f"{text}. The code made too many calls out of the sandbox in one eval "
                f"(at most {limits.max_host_calls} task()/tools calls). Do fewer at once.")
    if kind == "RecursionError":
        return f"{text}. Nested calls went deeper than {limits.max_recursion_depth}."
    return text
