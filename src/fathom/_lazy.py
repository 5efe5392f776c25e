"""Package names imported on first use, so importing a package stays cheap.

`fathom`, `fathom.backends` and `fathom.middleware` list their public names in a table
(each defining module → the names it gives) and hand it to `lazy_exports`, which builds the
package's module-level `__getattr__` and `__dir__`: a name is imported from its module the
first time it is asked for, then kept in the package's namespace so later lookups are plain.

Owns: the lazy lookup. Imports nothing of fathom.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public names live in the modules
    `where` names (module → its names)."""
    owner = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = owner.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        namespace = vars(sys.modules[package])
        return sorted([*namespace, *namespace.get("__all__", ())])

    return __getattr__, __dir__
