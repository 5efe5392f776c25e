"""Shared by the benchmark tests: importing `benchmarks/<name>.py` scripts by path."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """Import `benchmarks/<name>.py` as `name`, the way the scripts import each other
    (their folder goes first on `sys.path`, since they import `_harness`)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)
