"""Property: a `CompositeBackend` over state, disk and store behaves like a plain dict.

Hypothesis drives random writes, edits and deletes through one composite whose routes
overlap (`/store/` and `/store/nested/`), and after every step checks each possible path's
read, and the merged `glob`, `ls` and `grep` answers, against a dict of path → text.

A second machine drives uploads, downloads and recursive deletes through a composite over
state, disk, store and a sandbox (`LocalShellBackend`), with paths that lead out of the
disk roots mixed in, against a dict of path → bytes.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from langgraph.store.memory import InMemoryStore

from fathom.backends import (
    CompositeBackend,
    FilesystemBackend,
    LocalShellBackend,
    StateBackend,
    StoreBackend,
)
from fathom.backends.errors import ErrorKind, error_kind
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
        assert result.error is None, result.error  # an existing file is replaced
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
            assert error_kind(result.error) is ErrorKind.NOT_UNIQUE
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


# --------------------------------------------------------------------------- delete and transfer

TRANSFER_PREFIXES = ["/", "/disk/", "/store/", "/sandbox/"]
TRANSFER_PATHS = [p + d + n for p in TRANSFER_PREFIXES for d in DIRS for n in NAMES]
TRANSFER_DIRS = [p + d.rstrip("/") for p in TRANSFER_PREFIXES for d in DIRS[1:]]
ON_DISK = ("/disk/", "/sandbox/")
ESCAPES = [
    "/disk/../../outside/precious.txt",
    "/disk/link/precious.txt",
    "/sandbox/link/new.txt",
    "/sandbox/a/../../../outside",
]
"""Paths that lead out of a disk route (`..` above the root, a symlink to a directory
outside): every upload, download or delete of them must fail and change nothing."""

contents = st.binary(max_size=64) | texts.map(lambda text: text.encode("utf-8"))


class TransferMatchesDict(RuleBasedStateMachine):
    """Random uploads, downloads and (recursive) deletes through a composite over state,
    disk, store and a sandbox; the composite must agree with a dict of path -> bytes, and
    nothing outside the disk roots may change."""

    @initialize()
    def build(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="fathom-transfer-"))
        self.outside = self.tmp / "outside"
        self.outside.mkdir()
        (self.outside / "precious.txt").write_bytes(b"keep")
        disk_root, sandbox_root = self.tmp / "disk", self.tmp / "sandbox"
        for root in (disk_root, sandbox_root):
            root.mkdir()
            (root / "link").symlink_to(self.outside, target_is_directory=True)
        self.runtime = SimpleNamespace(state={"files": {}}, store=None)
        self.backend = CompositeBackend(
            default=StateBackend(),
            routes={
                "/disk/": FilesystemBackend(root_dir=disk_root, virtual_mode=True),
                "/store/": StoreBackend(store=InMemoryStore(), namespace=("prop",)),
                "/sandbox/": LocalShellBackend(root_dir=sandbox_root, virtual_mode=True),
            },
        ).bind(self.runtime)
        self.model: dict[str, bytes] = {}

    def teardown(self) -> None:
        tmp = getattr(self, "tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    def _apply(self, update) -> None:
        if update:
            self.runtime.state["files"] = merge_files(self.runtime.state["files"], update)

    @rule(batch=st.lists(st.tuples(st.sampled_from(TRANSFER_PATHS), contents), max_size=4))
    def upload(self, batch: list[tuple[str, bytes]]) -> None:
        results = self.backend.upload_files(batch)
        assert [r.path for r in results] == [path for path, _ in batch]
        assert all(r.error is None for r in results), results
        self._apply(getattr(results, "files_update", None))
        for path, content in batch:
            self.model[path] = content

    @rule(data=st.data(), asynchronous=st.booleans())
    def download(self, data, asynchronous: bool) -> None:
        paths = data.draw(st.lists(st.sampled_from(TRANSFER_PATHS), max_size=5))
        answers = (
            asyncio.run(self.backend.adownload_files(paths))
            if asynchronous
            else self.backend.download_files(paths)
        )
        assert [a.path for a in answers] == paths
        for path, answer in zip(paths, answers, strict=True):
            if path in self.model:
                assert answer.error is None, (path, answer.error)
                assert answer.content == self.model[path], path
            else:
                assert answer.error == ErrorKind.NOT_FOUND, (path, answer.error)

    @rule(path=st.sampled_from(TRANSFER_PATHS + TRANSFER_DIRS), asynchronous=st.booleans())
    def delete(self, path: str, asynchronous: bool) -> None:
        result = (
            asyncio.run(self.backend.adelete(path)) if asynchronous else self.backend.delete(path)
        )
        doomed = [p for p in self.model if p == path or p.startswith(path + "/")]
        if doomed:
            assert result.error is None, (path, result.error)
            assert result.path == path
            self._apply(result.files_update)
            for gone in doomed:
                del self.model[gone]
        elif path.startswith(ON_DISK) and result.error is None:
            # A real disk keeps a directory after its last file went; deleting it works.
            assert path in TRANSFER_DIRS
        else:
            assert error_kind(result.error) == ErrorKind.NOT_FOUND, (path, result.error)

    @rule(path=st.sampled_from(["/", "/disk", "/store/", "/sandbox"]))
    def delete_refused(self, path: str) -> None:
        assert error_kind(self.backend.delete(path).error) == ErrorKind.INVALID

    @rule(path=st.sampled_from(ESCAPES), content=contents)
    def escape(self, path: str, content: bytes) -> None:
        (uploaded,) = self.backend.upload_files([(path, content)])
        assert uploaded.error is not None, path
        (downloaded,) = self.backend.download_files([path])
        assert downloaded.error is not None and downloaded.content is None, path
        assert self.backend.delete(path).error is not None, path

    @invariant()
    def outside_is_untouched(self) -> None:
        assert sorted(p.name for p in self.outside.iterdir()) == ["precious.txt"]
        assert (self.outside / "precious.txt").read_bytes() == b"keep"

    @invariant()
    def reads_match(self) -> None:
        answers = self.backend.download_files(TRANSFER_PATHS)
        for path, answer in zip(TRANSFER_PATHS, answers, strict=True):
            assert (answer.content if answer.error is None else None) == self.model.get(path), (
                path,
                answer.error,
            )


TransferMatchesDict.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_transfer_and_delete_match_a_dict = TransferMatchesDict.TestCase
