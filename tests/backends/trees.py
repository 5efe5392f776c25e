"""A directory tree as data, to prove that an operation changed nothing outside a root."""

from __future__ import annotations

import os
from pathlib import Path


def tree_snapshot(path: Path) -> dict[str, bytes | str]:
    """Every entry under `path` by relative name: file bytes, `-> target` for links, `dir`."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            key = os.path.relpath(full, path)
            if os.path.islink(full):
                found[key] = "-> " + os.readlink(full)
            elif os.path.isdir(full):
                found[key] = "dir"
            else:
                found[key] = Path(full).read_bytes()
    return found
