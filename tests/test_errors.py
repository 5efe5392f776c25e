"""One error root: every exception class fathom defines derives from `fathom.errors.FathomError`.

Every module under `src/fathom` is imported (found by file, so a package without an
`__init__` would count too) and each exception class it defines is checked. Warning classes
(`SkillWarning(UserWarning)`) are categories for `warnings.warn`, not errors, and are left out.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from fathom.errors import FathomError

SRC = Path(__file__).resolve().parents[1] / "src"

def _module_names() -> list[str]:
    names: list[str] = []
    for path in sorted((SRC / "fathom").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue  # running it is its import
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _module_names():
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and not issubclass(obj, Warning)
                and obj.__module__ == module.__name__
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


CLASSES = _exception_classes()


def test_classes_were_found() -> None:
    assert len(CLASSES) > 30
    assert "fathom.project.config.ConfigError" in CLASSES


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_exception_derives_from_fathom_error(name: str) -> None:
    cls = CLASSES[name]
    assert issubclass(cls, FathomError), f"{name} must derive from fathom.errors.FathomError"


def test_builtin_bases_are_kept() -> None:
    from fathom.project.config import ConfigError
    from fathom.runs import ThreadBusyError

    assert issubclass(ConfigError, ValueError)
    assert issubclass(ThreadBusyError, RuntimeError)
