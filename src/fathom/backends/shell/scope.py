"""Sandbox lifecycle: one workspace per thread or per assistant, created on use, removed on close.

`SandboxScope` is a backend factory: pass it as `create_deep_agent(backend=...)`. For each
tool call it picks the key of the call's scope (the thread id, or the assistant id), creates
`<base_dir>/<key>/` the first time, builds the sandbox over it with `make`, and reuses it for
later calls with the same key. `close(key)` / `close_all()` remove the workspaces.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

__all__ = ["SandboxScope"]

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
    """

    can_execute = True
    """Tells `create_deep_agent` to offer the `execute` tool (the sandboxes run commands)."""

    def __init__(
        self,
        make: Callable[[Path], Any],
        base_dir: str | Path,
        *,
        scope: Literal["thread", "assistant"] = "thread",
    ) -> None:
        if scope not in ("thread", "assistant"):
            raise ValueError(f"scope must be 'thread' or 'assistant', not {scope!r}")
        self.make = make
        self.base_dir = Path(base_dir).resolve()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.scope = scope
        self._sandboxes: dict[str, Any] = {}
        self._lock = threading.Lock()

    def workspace(self, key: str) -> Path:
        """The workspace directory of a scope key."""
        return self.base_dir / _directory_name(key)

    def get(self, key: str) -> Any:
        """The sandbox for `key`, created on first use."""
        with self._lock:
            sandbox = self._sandboxes.get(key)
            if sandbox is None:
                root = self.workspace(key)
                root.mkdir(parents=True, exist_ok=True)
                sandbox = self._sandboxes[key] = self.make(root)
            return sandbox

    def __call__(self, runtime: Any) -> Any:
        return self.get(_scope_key(runtime, self.scope))

    def keys(self) -> list[str]:
        """The scope keys with a live sandbox."""
        with self._lock:
            return sorted(self._sandboxes)

    def close(self, key: str) -> None:
        """Forget the sandbox of `key` and delete its workspace."""
        with self._lock:
            sandbox = self._sandboxes.pop(key, None)
        closer = getattr(sandbox, "close", None)
        if callable(closer):
            closer()
        shutil.rmtree(self.workspace(key), ignore_errors=True)

    def close_all(self) -> None:
        """Close every sandbox and delete every workspace under `base_dir`."""
        for key in self.keys():
            self.close(key)

    def __enter__(self) -> SandboxScope:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()
