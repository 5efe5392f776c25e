"""What outside the Python environment some tests need, and how to get it.

A test that cannot run without a system package or one of the side environments that
`make test` builds skips with `needs(...)` as its reason. The reason starts with the
requirement's name, so the end of the run (`tests/conftest.py`) can print one line per
missing requirement with the package that would enable it, instead of a list of skips.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REQUIREMENTS", "Requirement", "needs", "requirement_of"]


@dataclass(frozen=True)
class Requirement:
    """Something a group of tests needs, and the command that provides it."""

    name: str
    enable: str


REQUIREMENTS: dict[str, Requirement] = {
    requirement.name: requirement
    for requirement in (
        Requirement("bubblewrap", "apt-get install bubblewrap (.ci/run installs it)"),
        Requirement("libseccomp", "apt-get install libseccomp2 (.ci/run installs it)"),
        Requirement("ripgrep", "apt-get install ripgrep (.ci/run installs it)"),
        Requirement("chromium", "apt-get install chromium, or set FATHOM_CHROMIUM"),
        Requirement("postgresql", "apt-get install postgresql (initdb and pg_ctl)"),
        Requirement(
            "langgraph dev",
            "make benchmarks/.venv-langgraph-dev/.installed (make test builds it), "
            "or set FATHOM_LANGGRAPH_DEV",
        ),
        Requirement(
            "the reference package",
            "make benchmarks/.venv-deepagents/.installed (make test builds it)",
        ),
        Requirement(
            "arize phoenix",
            "make benchmarks/.venv-phoenix/.installed (make test builds it), "
            "or set FATHOM_PHOENIX",
        ),
        Requirement("root", "run the suite as root (CI does)"),
        Requirement(
            "sqlite extensions",
            "a Python whose sqlite3 can load extensions (built with "
            "--enable-loadable-sqlite-extensions, as Debian's python3 is); this one runs "
            "the test of the clear error instead",
        ),
        Requirement(
            "deepagents in this environment",
            "pip install deepagents==0.7.32 into .venv (make test keeps the reference in "
            "benchmarks/.venv-deepagents, apart from fathom)",
        ),
    )
}
"""Every requirement a skip may name, by name."""

_PREFIX = "needs "


def needs(name: str, detail: str = "") -> str:
    """A skip reason naming requirement `name` (a key of `REQUIREMENTS`) and its fix."""
    requirement = REQUIREMENTS[name]
    extra = f" ({detail})" if detail else ""
    return f"{_PREFIX}{requirement.name}{extra}: {requirement.enable}"


def requirement_of(reason: str) -> Requirement | None:
    """The requirement a skip reason made by `needs` names, or `None` for another reason."""
    if not reason.startswith(_PREFIX):
        return None
    rest = reason.removeprefix(_PREFIX)
    for requirement in REQUIREMENTS.values():
        if rest.startswith(requirement.name) and rest[len(requirement.name):][:1] in (":", " "):
            return requirement
    return None
