"""`member_of`: a keyed set that holds a member only while its block runs."""

from __future__ import annotations

import pytest

from fathom.server.execution.locks import member_of


def test_a_member_is_in_its_set_only_while_the_block_runs() -> None:
    table: dict[str, set[str]] = {}
    with member_of(table, "t", "a") as first:
        assert first == "a" and table == {"t": {"a"}}
        with member_of(table, "t", "b"):
            assert table == {"t": {"a", "b"}}
        assert table == {"t": {"a"}}
    assert table == {}  # the key went with its last member


def test_a_failing_block_still_leaves_the_set() -> None:
    table: dict[str, set[int]] = {"other": {1}}
    with pytest.raises(RuntimeError), member_of(table, "t", 2):
        raise RuntimeError("the block failed")
    assert table == {"other": {1}}
