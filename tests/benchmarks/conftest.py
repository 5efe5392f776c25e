"""Shared by the benchmark tests: importing `benchmarks/<name>.py` scripts by path."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """Import `benchmarks/<name>.py` as `name`, the way the scripts import each other
    (their folder goes first on `sys.path`, since they import `_harness`).

    A test folder of the same name (`tests/server/`, `tests/patterns/`) is imported by
    pytest as the top-level package `name`; then the script is loaded from its file under
    the name `benchmark_<name>` instead, leaving that package in place.
    """
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    file = BENCHMARKS / f"{name}.py"
    taken = sys.modules.get(name)
    if taken is None or Path(getattr(taken, "__file__", None) or "") == file:
        return importlib.import_module(name)
    private = f"benchmark_{name}"
    if private in sys.modules:
        return sys.modules[private]
    spec = importlib.util.spec_from_file_location(private, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[private] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module
