"""Old import paths of modules that moved, kept working.

The protocol packages live under `fathom.protocols` (`a2a`, `acp`, `mcp`); their public
paths `fathom.a2a`, `fathom.acp` and `fathom.mcp` are small packages that re-export the
public names (so type checkers see them). This finder makes every submodule path under an
old name (`fathom.mcp.client`, `fathom.a2a.routes`, ...) the very module object of its new
name, so `isinstance` checks and module-level state are shared, never copied.

Owns: the alias table and the finder. Imports nothing of fathom.

Layer: core, the lowest; it must not import any other layer of fathom.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__all__ = ["ALIASES", "MODULE_ALIASES", "install"]

ALIASES = {
    "fathom.a2a": "fathom.protocols.a2a",
    "fathom.acp": "fathom.protocols.acp",
    "fathom.mcp": "fathom.protocols.mcp",
}
"""Old package name → where it lives now (submodules follow)."""

MODULE_ALIASES = {
    "fathom.mcp.client": "fathom.tools.mcp",
    "fathom.mcp.config": "fathom.tools.mcp_config",
}
"""Old module name → where it lives now, where a module left its package."""


class _Existing(importlib.abc.Loader):
    """A loader whose module is one already imported under its new name."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran when it was imported under its new name."""


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds `fathom.mcp.<sub>` (and the others) as `fathom.protocols.mcp.<sub>`."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in MODULE_ALIASES:
            return importlib.machinery.ModuleSpec(fullname, _Existing(MODULE_ALIASES[fullname]))
        for old, new in ALIASES.items():
            if fullname.startswith(old + "."):
                real = new + fullname[len(old):]
                return importlib.machinery.ModuleSpec(fullname, _Existing(real))
        return None


_FINDER = _AliasFinder()


def install() -> None:
    """Put the finder first on `sys.meta_path` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
