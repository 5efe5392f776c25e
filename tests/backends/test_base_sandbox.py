"""`BaseSandbox` over a real shell: a subclass that writes only `execute` gets every file
operation, behaving like `FilesystemBackend`, safe for any file name and any bytes."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from tests.backends.local_sandbox import LocalShellSandbox

from fathom import create_deep_agent
from fathom.backends import BaseSandbox, FilesystemBackend
from fathom.backends.errors import ErrorKind, error_kind
from fathom.backends.protocol import ExecuteResponse
from fathom.testing import ScriptedModel, ai, tool_call

pytestmark = pytest.mark.timeout(120)

HOSTILE = [
    "/it's \"quoted\".txt",
    "/$(touch pwned).txt",
    "/`touch pwned`.txt",
    "/semi; touch pwned; echo.txt",
    "/line\nbreak.txt",
    "/-rf --no-preserve-root",
    "/ünïcödé ✓ 文件.md",
    "/dir $(id)/FATHOM_EOF_0000000000000000.txt",
    "/tab\there and a trailing space .txt",
]


@pytest.fixture
def place(tmp_path: Path) -> tuple[Path, Path]:
    """`(root, outside)`: the sandbox's root, and a sibling directory it must not touch."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("keep me\n")
    return root, outside


def _tree(top: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for here, dirs, files in os.walk(top):
        for name in dirs:
            found[os.path.join(here, name)] = None
        for name in files:
            full = os.path.join(here, name)
            found[full] = None if os.path.islink(full) else Path(full).read_bytes()
    return found


def test_a_subclass_with_only_execute_gets_every_operation(place: tuple[Path, Path]) -> None:
    assert set(vars(LocalShellSandbox)) & {"read", "write", "ls", "glob", "grep"} == set()
    box = LocalShellSandbox(place[0])
    assert box.write("/a/b.txt", "hello\nworld\n").path == "/a/b.txt"
    assert (place[0] / "a" / "b.txt").read_text() == "hello\nworld\n"
    assert [e["path"] for e in box.ls("/").entries] == ["/a/"]
    page = box.read("/a/b.txt", offset=1, limit=1)
    assert (page.file_data["content"], page.start_line, page.total_lines) == ("world\n", 2, 2)
    assert box.edit("/a/b.txt", "world", "there").occurrences == 1
    assert [m["path"] for m in box.glob("**/*.txt").matches] == ["/a/b.txt"]
    (match,) = box.grep("there", context_lines=1).matches
    assert (match["line"], match["context_before"]) == (2, [{"line": 1, "text": "hello"}])
    assert box.write("/a/b.txt", "replaced").error is None  # write replaces
    assert box.delete("/a").path == "/a"
    assert list(place[0].iterdir()) == []
    assert box.id.startswith("sandbox-") and box.id == box.id


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_only_names(place: tuple[Path, Path], name: str) -> None:
    root, outside = place
    before = _tree(outside)
    box = LocalShellSandbox(root)
    content = "line one\n$(touch pwned) `touch pwned` ' \" \\ \n"
    assert box.write(name, content).error is None
    assert box.read(name).file_data["content"] == content
    parent = name.rsplit("/", 1)[0] or "/"
    assert name in [e["path"] for e in box.ls(parent).entries]
    assert name in [m["path"] for m in box.glob("**").matches]
    assert [m["path"] for m in box.grep("touch pwned").matches] == [name]
    assert box.edit(name, "line one", "$(reboot)").error is None
    (up,) = box.upload_files([(name, b"\x00\xff" + name.encode())])
    assert up.error is None
    (down,) = box.download_files([name])
    assert down.content == b"\x00\xff" + name.encode()
    assert box.delete(name).error is None
    assert box.read(name).error.kind is ErrorKind.NOT_FOUND
    pwned = [p for p in root.parent.rglob("*pwned*") if p.name in ("pwned",)]
    assert pwned == [] and not Path("pwned").exists()
    assert _tree(outside) == before


def test_nul_and_climbing_paths_are_invalid(place: tuple[Path, Path]) -> None:
    box = LocalShellSandbox(place[0])
    for path in ("/a\x00b", "/../outside/secret.txt", "../../x"):
        assert error_kind(box.write(path, "x").error) is ErrorKind.INVALID
        assert error_kind(box.read(path).error) is ErrorKind.INVALID
        assert error_kind(box.delete(path).error) is ErrorKind.INVALID
        (up,) = box.upload_files([(path, b"x")])
        assert up.error == ErrorKind.INVALID
    assert error_kind(box.delete("/").error) is ErrorKind.INVALID
    assert box.commands == 0  # refused before anything reached the sandbox


def test_links_out_of_the_root_are_refused(place: tuple[Path, Path]) -> None:
    root, outside = place
    before = _tree(outside)
    (root / "out").symlink_to(outside)
    (root / "secret").symlink_to(outside / "secret.txt")
    box = LocalShellSandbox(root)
    assert error_kind(box.read("/secret").error) is ErrorKind.OUTSIDE_ROOT
    assert error_kind(box.read("/out/secret.txt").error) is ErrorKind.OUTSIDE_ROOT
    assert error_kind(box.write("/out/new.txt", "x").error) is ErrorKind.OUTSIDE_ROOT
    assert error_kind(box.write("/secret", "x").error) is ErrorKind.OUTSIDE_ROOT
    assert error_kind(box.edit("/secret", "keep", "lose").error) is ErrorKind.OUTSIDE_ROOT
    assert error_kind(box.delete("/out/secret.txt").error) is ErrorKind.OUTSIDE_ROOT
    assert error_kind(box.delete("/secret").error) is ErrorKind.OUTSIDE_ROOT
    assert error_kind(box.ls("/out").error) is ErrorKind.OUTSIDE_ROOT
    assert box.glob("**").matches == []
    assert box.grep("keep").matches == []
    assert _tree(outside) == before


def test_binary_and_large_content_travel_intact(place: tuple[Path, Path]) -> None:
    box = LocalShellSandbox(place[0])
    blob = bytes(range(256)) * 800  # 200 KB: several transfer chunks each way
    (up,) = box.upload_files([("/bin/blob.dat", blob)])
    assert up.error is None
    assert (place[0] / "bin" / "blob.dat").read_bytes() == blob
    before = box.commands
    (down,) = box.download_files(["/bin/blob.dat"])
    assert down.content == blob
    assert box.commands - before == -(-len(blob) // box.transfer_chunk_bytes)
    read = box.read("/bin/blob.dat")
    assert read.file_data["encoding"] == "base64"
    text = "".join(f"{n:06d} ünï\n" for n in range(30_000))
    assert box.write("/big.txt", text).error is None
    assert (place[0] / "big.txt").read_text(encoding="utf-8") == text
    assert box.edit("/big.txt", "029999 ünï", "last").error is None
    assert box.read("/big.txt", offset=29_999).file_data["content"] == "last\n"


def test_typed_errors_match_the_disk_backend(place: tuple[Path, Path]) -> None:
    root = place[0]
    disk_root = Path(tempfile.mkdtemp())
    try:
        disk = FilesystemBackend(root_dir=disk_root, virtual_mode=True)
        box = LocalShellSandbox(root)
        for backend in (disk, box):
            backend.write("/d/f.txt", "aa aa\n")
        calls = [
            lambda b: b.read("/missing.txt"),
            lambda b: b.read("/d"),
            lambda b: b.read("/d/f.txt", offset=5),
            lambda b: b.write("/d", "x"),
            lambda b: b.write("/d/f.txt/x", "x"),
            lambda b: b.edit("/d/f.txt", "zz", "y"),
            lambda b: b.edit("/d/f.txt", "aa", "y"),
            lambda b: b.edit("/missing.txt", "a", "b"),
            lambda b: b.delete("/missing.txt"),
            lambda b: b.glob("{" * 20 + "a" + "}" * 20),
            lambda b: b.grep("a", glob="[" * 2000),
        ]
        for call in calls:
            expected = call(disk).error
            got = call(box).error
            assert expected is not None
            assert error_kind(got) == error_kind(expected), (expected, got)
    finally:
        shutil.rmtree(disk_root, ignore_errors=True)


def test_async_twins_run_over_aexecute(place: tuple[Path, Path]) -> None:
    class AsyncOnly(LocalShellSandbox):
        def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
            raise AssertionError("the async methods must use aexecute")

        async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
            return await asyncio.to_thread(LocalShellSandbox.execute, self, command)

    box = AsyncOnly(place[0])

    async def main() -> None:
        assert (await box.awrite("/x.md", "alpha\nbeta\n")).error is None
        assert (await box.aread("/x.md", 1, 1)).file_data["content"] == "beta\n"
        assert (await box.aedit("/x.md", "beta", "gamma")).occurrences == 1
        assert [m["line"] for m in (await box.agrep("gamma")).matches] == [2]
        assert [m["path"] for m in (await box.aglob("*.md")).matches] == ["/x.md"]
        assert [e["path"] for e in (await box.als("/")).entries] == ["/x.md"]
        (up,) = await box.aupload_files([("/y.bin", b"\x00\x01")])
        (down,) = await box.adownload_files(["/y.bin"])
        assert up.error is None and down.content == b"\x00\x01"
        assert (await box.adelete("/x.md")).error is None

    asyncio.run(main())


def test_without_python3_the_error_says_so(place: tuple[Path, Path]) -> None:
    class NoPython(BaseSandbox):
        def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
            env = {"PATH": str(place[1])}  # no python3 there
            import subprocess

            done = subprocess.run(
                ["/bin/sh", "-c", command], capture_output=True, env=env, check=False
            )
            return ExecuteResponse((done.stdout + done.stderr).decode(), done.returncode)

    box = NoPython()
    error = box.read("/etc/hostname").error
    assert error_kind(error) is ErrorKind.FAILED
    assert "python3 is not available in the sandbox" in error.detail
    (up,) = box.upload_files([("/x", b"x")])
    assert up.error == ErrorKind.FAILED


def test_the_agent_tools_work_over_a_sandbox(place: tuple[Path, Path]) -> None:
    box = LocalShellSandbox(place[0])
    name = "/notes/$(touch pwned) it's.md"
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": name, "content": "hi\n"})),
            ai("", tool_call("execute", {"command": "cat notes/*.md"})),
            ai("done"),
        ]
    )
    agent = create_deep_agent(model, backend=box)
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    written, ran = [m for m in result["messages"] if m.type == "tool"]
    assert written.status != "error", written.text
    assert ran.text.startswith("hi\n")
    assert (place[0] / "notes" / "$(touch pwned) it's.md").read_text() == "hi\n"
    assert not list(place[0].parent.rglob("pwned"))


# --------------------------------------------------------------- the shared battery

NAMES = ["/a.txt", "/d/b.md", "/d/e/c.txt", "/x y.txt"]
texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"),
    max_size=30,
)


class SandboxMatchesDisk(RuleBasedStateMachine):
    """Random operations on a `BaseSandbox` and a `FilesystemBackend`: same answers."""

    @initialize()
    def build(self) -> None:
        self.roots = [tempfile.mkdtemp(prefix="fathom-sbx-"), tempfile.mkdtemp(prefix="fathom-")]
        self.box = LocalShellSandbox(self.roots[0])
        self.disk = FilesystemBackend(root_dir=self.roots[1], virtual_mode=True)

    def teardown(self) -> None:
        for root in getattr(self, "roots", []):
            shutil.rmtree(root, ignore_errors=True)

    def both(self, call):
        got, expected = call(self.box), call(self.disk)
        assert error_kind(got.error) == error_kind(expected.error), (got, expected)
        return got, expected

    @rule(path=st.sampled_from(NAMES), content=texts)
    def write(self, path: str, content: str) -> None:
        self.both(lambda b: b.write(path, content))

    @rule(path=st.sampled_from(NAMES), old=texts, new=texts, replace_all=st.booleans())
    def edit(self, path: str, old: str, new: str, replace_all: bool) -> None:
        got, expected = self.both(lambda b: b.edit(path, old, new, replace_all))
        assert got.occurrences == expected.occurrences

    @rule(path=st.sampled_from([*NAMES, "/d", "/d/e"]))
    def delete(self, path: str) -> None:
        self.both(lambda b: b.delete(path))

    @rule(path=st.sampled_from(NAMES), data=st.binary(max_size=40))
    def upload(self, path: str, data: bytes) -> None:
        (got,) = self.box.upload_files([(path, data)])
        (expected,) = self.disk.upload_files([(path, data)])
        assert got.error == expected.error

    @invariant()
    def same_files(self) -> None:
        globbed = [self.box.glob("**"), self.disk.glob("**")]
        paths = [[m["path"] for m in g.matches] for g in globbed]
        assert paths[0] == paths[1]
        downloads = [b.download_files(paths[1]) for b in (self.box, self.disk)]
        assert [d.content for d in downloads[0]] == [d.content for d in downloads[1]]
        for directory in ("/", "/d/"):
            listed = [b.ls(directory) for b in (self.box, self.disk)]
            assert error_kind(listed[0].error) == error_kind(listed[1].error)
            assert [e["path"] for e in listed[0].entries or []] == [
                e["path"] for e in listed[1].entries or []
            ]
        grepped = [b.grep("a", context_lines=1) for b in (self.box, self.disk)]
        assert grepped[0].matches == grepped[1].matches


SandboxMatchesDisk.TestCase.settings = settings(
    max_examples=8,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_sandbox_matches_the_disk_backend = SandboxMatchesDisk.TestCase
