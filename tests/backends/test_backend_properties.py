"""Property: a `CompositeBackend` over state, disk and store behaves like a plain dict.

Hypothesis drives random writes, edits and deletes through one composite whose routes
overlap (`/store/` and `/store/nested/`), and after every step checks each possible path's
read, and the merged `glob`, `ls` and `grep` answers, against a dict of path → text.
"""

from __future__ import annotations

import shutil
import tempfile
from types import SimpleNamespace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from langgraph.store.memory import InMemoryStore

from fathom.backends import (
    CompositeBackend,
    FilesystemBackend,
    StateBackend,
    StoreBackend,
)
from fathom.state import merge_files

PREFIXES = ["/", "/disk/", "/store/", "/store/nested/"]
DIRS = ["", "a/", "a/b/"]
NAMES = ["x.txt", "y.md", "z.txt"]
PATHS = [p + d + n for p in PREFIXES for d in DIRS for n in NAMES]

texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=40,
)


class CompositeMatchesDict(RuleBasedStateMachine):
    """Random file operations; the composite must agree with `self.model` after each."""

    @initialize()
    def build(self) -> None:
        self.root = tempfile.mkdtemp(prefix="fathom-prop-")
        self.runtime = SimpleNamespace(state={"files": {}}, store=None)
        self.backend = CompositeBackend(
            default=StateBackend(),
            routes={
                "/disk/": FilesystemBackend(root_dir=self.root, virtual_mode=True),
                "/store/": StoreBackend(store=InMemoryStore(), namespace=("prop",)),
                "/store/nested/": StateBackend(),
            },
        ).bind(self.runtime)
        self.model: dict[str, str] = {}

    def teardown(self) -> None:
        root = getattr(self, "root", None)
        if root:
            shutil.rmtree(root, ignore_errors=True)

    def _apply(self, result) -> None:
        if result.error is None and result.files_update:
            self.runtime.state["files"] = merge_files(
                self.runtime.state["files"], result.files_update
            )

    @rule(path=st.sampled_from(PATHS), content=texts)
    def write(self, path: str, content: str) -> None:
        result = self.backend.write(path, content)
        self._apply(result)
        if path in self.model:
            assert result.error and "already exists" in result.error
        else:
            assert result.error is None, result.error
            assert result.path == path
            self.model[path] = content

    @rule(data=st.data(), path=st.sampled_from(PATHS), replace_all=st.booleans())
    def edit(self, data, path: str, replace_all: bool) -> None:
        current = self.model.get(path, "")
        if current and data.draw(st.booleans()):
            start = data.draw(st.integers(0, len(current) - 1))
            end = data.draw(st.integers(start + 1, len(current)))
            old = current[start:end]
        else:
            old = data.draw(texts)
        new = data.draw(texts)
        result = self.backend.edit(path, old, new, replace_all)
        self._apply(result)
        count = current.count(old) if old else 0
        if path not in self.model or not old or old == new or count == 0:
            assert result.error is not None
        elif count > 1 and not replace_all:
            assert result.error and "occurs" in result.error
        else:
            assert result.error is None, result.error
            assert result.occurrences == (count if replace_all else 1)
            self.model[path] = current.replace(old, new) if replace_all else current.replace(
                old, new, 1
            )

    @rule(path=st.sampled_from(PATHS))
    def delete(self, path: str) -> None:
        result = self.backend.delete(path)
        self._apply(result)
        if path in self.model:
            assert result.error is None, result.error
            del self.model[path]
        else:
            assert result.error is not None

    @invariant()
    def reads_match(self) -> None:
        for path in PATHS:
            result = self.backend.read(path)
            if path in self.model:
                assert result.error is None, (path, result.error)
                assert result.file_data["content"] == self.model[path], path
            else:
                assert result.error is not None, path

    @invariant()
    def listings_match(self) -> None:
        globbed = self.backend.glob("**")
        assert globbed.error is None, globbed.error
        assert [m["path"] for m in globbed.matches] == sorted(self.model)
        for prefix in PREFIXES:
            for directory in DIRS:
                base = prefix + directory
                expected = set()
                for path in self.model:
                    if path.startswith(base):
                        rest = path[len(base) :]
                        expected.add(base + rest.split("/", 1)[0] + ("/" if "/" in rest else ""))
                expected |= {r for r in ("/disk/", "/store/") if base == "/"}
                expected |= {"/store/nested/" for _ in [0] if base == "/store/"}
                listed = self.backend.ls(base)
                entries = {e["path"]: e for e in listed.entries or []}
                # A real disk keeps a directory after its last file is deleted.
                extra = set(entries) - expected
                assert all(
                    p.startswith("/disk/") and entries[p].get("is_dir") for p in extra
                ), (base, extra)
                if expected:
                    assert listed.error is None, (base, listed.error)
                    assert expected <= set(entries), base

    @invariant()
    def grep_matches(self) -> None:
        result = self.backend.grep("a")
        assert result.error is None, result.error
        expected = sorted(
            (path, number)
            for path, text in self.model.items()
            for number, line in enumerate(text.splitlines(), start=1)
            if "a" in line
        )
        assert sorted((m["path"], m["line"]) for m in result.matches) == expected


CompositeMatchesDict.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_composite_matches_a_dict = CompositeMatchesDict.TestCase
