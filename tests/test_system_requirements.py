"""Skips that name a missing requirement are grouped by it at the end of the run."""

from __future__ import annotations

import pytest
from tests.system_requirements import REQUIREMENTS, needs, requirement_of


@pytest.mark.parametrize("name", sorted(REQUIREMENTS))
def test_a_reason_made_by_needs_names_its_requirement(name: str) -> None:
    assert requirement_of(needs(name)) is REQUIREMENTS[name]
    assert requirement_of(needs(name, "some detail")) is REQUIREMENTS[name]


def test_a_reason_names_the_command_that_enables_it() -> None:
    assert needs("bubblewrap") == (
        "needs bubblewrap: apt-get install bubblewrap (.ci/run installs it)"
    )


def test_other_reasons_name_no_requirement() -> None:
    assert requirement_of("needs a pty") is None
    assert requirement_of("this kernel has no usable openat2") is None
    assert requirement_of("needs rootless mode") is None


def test_an_unknown_requirement_is_a_programming_error() -> None:
    with pytest.raises(KeyError):
        needs("bubblewarp")
