"""Shared by the pattern tests: importing example and benchmark scripts from their paths."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(path: Path, module_name: str) -> ModuleType:
    """Import the script at `path` as `module_name` (once; later calls reuse it)."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclass and pydantic introspection look it up by name
    spec.loader.exec_module(module)
    return module


def load_example(name: str) -> ModuleType:
    """Import `examples/patterns/<name>.py` under a private module name."""
    return load_script(ROOT / "examples" / "patterns" / f"{name}.py",
                       f"fathom_pattern_example_{name}")
