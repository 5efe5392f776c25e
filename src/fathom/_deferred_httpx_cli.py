"""httpx's command-line module, loaded only when something calls it.

`import httpx` runs `from ._main import main` (the `httpx` command), and that module imports
click, rich and pygments whenever they are installed, which with fathom they are (the
`fathom` command uses rich and pygments, uvicorn brings click). LangGraph imports httpx
through langgraph-sdk, so without this every `from fathom import create_deep_agent` would
load a command-line client it never runs, some 40 ms of the start-up.

`install()` puts a finder first on `sys.meta_path` that answers the next import of
`httpx._main` with a small stand-in module, then removes itself. The stand-in's `main` and
any other attribute load the real module on first use, so `httpx.main()` and
`from httpx._main import print_help` still work. Nothing changes once httpx is imported.

Layer: core, the lowest; it must not import any other layer of fathom.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["install"]

_NAME = "httpx._main"
_MARK = "__fathom_deferred__"


def _real() -> ModuleType:
    """The real `httpx._main`, imported now in place of the stand-in."""
    current = sys.modules.get(_NAME)
    if current is not None and not getattr(current, _MARK, False):
        return current
    sys.modules.pop(_NAME, None)
    try:
        return importlib.import_module(_NAME)
    finally:  # cleanup: a failed import leaves no module behind, and the stand-in goes back
        if current is not None and _NAME not in sys.modules:
            sys.modules[_NAME] = current


def _main(*args: Any, **kwargs: Any) -> Any:
    """`httpx.main`: the `httpx` command, loaded when it runs."""
    return _real().main(*args, **kwargs)


def _attribute(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_real(), name)


class _Finder:
    """Answers the next `import httpx._main` with the stand-in, once (finder and loader:
    the import system only calls these methods, so no `importlib.abc` import is needed)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _NAME:
            return None
        _uninstall()
        return importlib.machinery.ModuleSpec(fullname, self)  # pyright: ignore[reportArgumentType]

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        setattr(module, _MARK, True)
        module.main = _main  # pyright: ignore[reportAttributeAccessIssue]
        module.__getattr__ = _attribute  # pyright: ignore[reportAttributeAccessIssue]


_FINDER = _Finder()


def _uninstall() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def install() -> None:
    """Defer httpx's command-line module, unless httpx is imported already."""
    if "httpx" in sys.modules or _FINDER in sys.meta_path:
        return
    sys.meta_path.insert(0, _FINDER)
