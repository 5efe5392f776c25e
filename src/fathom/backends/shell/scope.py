"""Sandbox lifecycle: one workspace per thread or per assistant, created on use, removed on close.

`SandboxScope` is a backend factory: pass it as `create_deep_agent(backend=...)`. For each
tool call it picks the key of the call's scope (the thread id, or the assistant id), creates
`<base_dir>/<key>/` the first time, builds the sandbox over it with `make`, and reuses it for
later calls with the same key. `close(key)` / `close_all()` remove the workspaces.

With `idle_ttl`, a sandbox no tool call has used for that many seconds is closed (its
workspace stays) and built again over the same workspace by the next call that needs it.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

__all__ = ["SandboxScope"]

logger = logging.getLogger(__name__)

_SAFE = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _directory_name(key: str) -> str:
    """A file-system-safe, collision-free directory name for a scope key."""
    if _SAFE.fullmatch(key) and key not in (".", ".."):
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:32].strip("._") or "key"
    return f"{readable}-{digest}"


def _scope_key(runtime: Any, scope: str) -> str:
    config = getattr(runtime, "config", None) or {}
    configurable = config.get("configurable", {}) if isinstance(config, dict) else {}
    if scope == "thread":
        info = getattr(runtime, "execution_info", None)
        key = getattr(info, "thread_id", None) or configurable.get("thread_id")
    else:
        server = getattr(runtime, "server_info", None)
        metadata = config.get("metadata", {}) if isinstance(config, dict) else {}
        key = (
            getattr(server, "assistant_id", None)
            or configurable.get("assistant_id")
            or metadata.get("assistant_id")
        )
    return str(key) if key else "default"


class SandboxScope:
    """A backend factory that keeps one sandbox per thread (or per assistant).

    Args:
        make: Builds the sandbox for a workspace directory, e.g.
            `lambda root: BubblewrapSandbox(root_dir=root)`.
        base_dir: Where the workspaces live (created if missing).
        scope: `"thread"` (default: the run's `thread_id`) or `"assistant"`.
        idle_ttl: Seconds after which a sandbox that no tool call has used is closed (its
            `close()` is called, when it has one) and forgotten; its workspace and files
            stay, and the next call for its key builds a new sandbox over them. A call
            may still be running a command when the sandbox is next checked, so a sandbox
            counts as idle only after `idle_ttl` plus its `max_timeout` (the longest a
            command may run; `inf` or absent counts as 0). Checked on every call and by
            `expire_idle()`, which a server may also call on a timer. `None` (default):
            sandboxes live until `close`.
        clock: The monotonic clock in seconds that `idle_ttl` is measured with
            (default `time.monotonic`; tests pass their own).
    """

    can_execute = True
    """Tells `create_deep_agent` to offer the `execute` tool (the sandboxes run commands)."""

    def __init__(
        self,
        make: Callable[[Path], Any],
        base_dir: str | Path,
        *,
        scope: Literal["thread", "assistant"] = "thread",
        idle_ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if scope not in ("thread", "assistant"):
            raise ValueError(f"scope must be 'thread' or 'assistant', not {scope!r}")
        if idle_ttl is not None and (
            isinstance(idle_ttl, bool) or not isinstance(idle_ttl, int | float)
            or not math.isfinite(idle_ttl) or idle_ttl <= 0
        ):
            raise ValueError(
                f"idle_ttl must be a positive number of seconds or None (no expiry), not "
                f"{idle_ttl!r}."
            )
        self.make = make
        self.base_dir = Path(base_dir).resolve()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.scope = scope
        self.idle_ttl = idle_ttl
        self.clock = clock
        self._sandboxes: dict[str, Any] = {}
        self._last_used: dict[str, float] = {}
        self._lock = threading.Lock()

    def workspace(self, key: str) -> Path:
        """The workspace directory of a scope key."""
        return self.base_dir / _directory_name(key)

    def get(self, key: str) -> Any:
        """The sandbox for `key`, created on first use (and again after it expired)."""
        self.expire_idle()
        with self._lock:
            sandbox = self._sandboxes.get(key)
            if sandbox is None:
                root = self.workspace(key)
                root.mkdir(parents=True, exist_ok=True)
                sandbox = self._sandboxes[key] = self.make(root)
            self._last_used[key] = self.clock()
            return sandbox

    def __call__(self, runtime: Any) -> Any:
        return self.get(_scope_key(runtime, self.scope))

    def keys(self) -> list[str]:
        """The scope keys with a live sandbox."""
        with self._lock:
            return sorted(self._sandboxes)

    def expire_idle(self) -> list[str]:
        """Close the sandboxes idle for longer than `idle_ttl` (see the class); return their
        keys. Their workspaces stay. Nothing happens without `idle_ttl`."""
        if self.idle_ttl is None:
            return []
        now = self.clock()
        with self._lock:
            expired = [
                key for key, sandbox in self._sandboxes.items()
                if now - self._last_used.get(key, now) > self.idle_ttl + _longest_command(sandbox)
            ]
            closing = [(key, self._sandboxes.pop(key)) for key in expired]
            for key in expired:
                self._last_used.pop(key, None)
        for key, sandbox in closing:
            logger.debug("Closing the sandbox of %r after %s s idle", key, self.idle_ttl)
            _close(sandbox)
        return expired

    def close(self, key: str) -> None:
        """Forget the sandbox of `key` and delete its workspace."""
        with self._lock:
            sandbox = self._sandboxes.pop(key, None)
            self._last_used.pop(key, None)
        _close(sandbox)
        shutil.rmtree(self.workspace(key), ignore_errors=True)

    def close_all(self) -> None:
        """Close every sandbox and delete every workspace under `base_dir`."""
        for key in self.keys():
            self.close(key)

    def __enter__(self) -> SandboxScope:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()


def _longest_command(sandbox: Any) -> float:
    """How long a command started just before the last use may still run: the sandbox's
    `max_timeout` when it is a finite number of seconds, else 0."""
    limit = getattr(sandbox, "max_timeout", None)
    if isinstance(limit, int | float) and not isinstance(limit, bool) and math.isfinite(limit):
        return max(float(limit), 0.0)
    return 0.0


def _close(sandbox: Any) -> None:
    closer = getattr(sandbox, "close", None)
    if callable(closer):
        closer()
