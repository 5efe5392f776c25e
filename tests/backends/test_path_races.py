"""Confinement under concurrent modification: swapping a directory for a symlink mid-call.

A process that shares the workspace (a command run through `execute`, or anything on the
host) can replace a directory inside the root by a symlink to a directory outside it
between a path check and the open that follows. The file tools must resolve and open
without such a gap, so no call ever reads, writes, edits, deletes or lists outside.

The swap runs for `FATHOM_RACE_SECONDS` seconds (default 3; a longer trial such as
`FATHOM_RACE_SECONDS=10` is stronger), in a separate process so it truly runs in parallel with
the tool calls, which run in threads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.backends.trees import tree_snapshot

from fathom.backends import _beneath
from fathom.backends.errors import ErrorKind
from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.shell.bubblewrap import BubblewrapSandbox
from fathom.backends.shell.local import LocalShellBackend

SECONDS = float(os.environ.get("FATHOM_RACE_SECONDS", "3"))
SECRET = "TOP SECRET outside the root\n"

SWAPPER = r"""
import os, sys
root, outside, stop = sys.argv[1], sys.argv[2], sys.argv[3]
d, hidden, link = (os.path.join(root, name) for name in ("d", ".d-hidden", ".d-link"))
swaps = 0
while not os.path.exists(stop):
    os.rename(d, hidden)
    os.symlink(outside, link)
    try:
        os.rename(link, d)  # fails when a write recreated `d` meanwhile
    except OSError:
        os.unlink(link)
    if os.path.islink(d):
        os.unlink(d)
    for attempt in range(1000):
        try:
            os.rename(hidden, d)
            break
        except OSError:  # a tool call created `d` in the gap: keep that one aside
            os.rename(d, os.path.join(root, f".d-made-{swaps}-{attempt}"))
    swaps += 1
print(swaps)
"""


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run with the kernel's `openat2` and again with the portable `O_NOFOLLOW` walk."""
    if request.param == "walk":
        monkeypatch.setattr(_beneath._Openat2, "get", classmethod(lambda cls: None))
    elif _beneath._Openat2.get() is None:
        pytest.skip("this kernel has no usable openat2")
    return str(request.param)




def sandbox_or_shell(root: Path) -> FilesystemBackend:
    """A backend with `upload_files`/`download_files`: the sandbox when bwrap works here."""
    try:
        return BubblewrapSandbox(root, timeout=120)
    except RuntimeError:
        return LocalShellBackend(root, virtual_mode=True)


@pytest.mark.parametrize("kind", ["filesystem", "transfer"])
def test_swapping_a_directory_for_a_symlink_never_leads_outside(
    tmp_path: Path, kind: str, resolution: str
) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    (root / "d" / "f.txt").write_text("inside the root\n")
    (outside / "f.txt").write_text(SECRET)
    (outside / "only-outside.txt").write_text(SECRET)
    (outside / "keep.txt").write_text(SECRET)
    before = tree_snapshot(outside)
    backend = (
        FilesystemBackend(root, virtual_mode=True)
        if kind == "filesystem"
        else sandbox_or_shell(root)
    )

    escapes: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def leaked(text: object) -> bool:
        return "TOP SECRET" in str(text) or "only-outside" in str(text)

    def operations(worker: int) -> list[tuple[str, Callable[[int], bool]]]:
        """`(name, call)`: each call returns whether it showed something from outside."""
        filesystem = [
            ("read", lambda n: leaked(backend.read("/d/f.txt").file_data)),
            ("write", lambda n: backend.write(f"/d/w{worker}-{n}.txt", "w") and False),
            ("write_deep", lambda n: backend.write(f"/d/x{worker}-{n}/y.txt", "w") and False),
            ("edit", lambda n: leaked(backend.edit("/d/f.txt", "TOP SECRET", "OWNED"))),
            ("ls", lambda n: leaked(backend.ls("/d").entries)),
            ("grep", lambda n: leaked(backend.grep("TOP SECRET").matches)),
            ("grep_d", lambda n: leaked(backend.grep("SECRET", "/d/f.txt").matches)),
            ("glob", lambda n: leaked(backend.glob("**", "/d").matches)),
            ("delete", lambda n: backend.delete("/d/keep.txt").error is None),
        ]
        if kind == "filesystem":
            return filesystem
        return [
            *filesystem[:1],
            (
                "upload",
                lambda n: bool(backend.upload_files([(f"/d/u{worker}-{n}.bin", b"u")]))
                and False,
            ),
            ("upload_over", lambda n: bool(backend.upload_files([("/d/f.txt", b"up")])) and False),
            (
                "download",
                lambda n: any(leaked(r.content) for r in backend.download_files(["/d/f.txt"])),
            ),
        ]

    def work(worker: int) -> None:
        n = 0
        while not stop.is_set():
            for name, call in operations(worker):
                n += 1
                escaped = call(n)
                with lock:
                    calls[name] += 1
                    if escaped:
                        escapes[name] += 1

    stop_file = tmp_path / "stop"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(root), str(outside), str(stop_file)],
        stdout=subprocess.PIPE,
        text=True,
    )
    workers = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    try:
        for thread in workers:
            thread.start()
        stop.wait(SECONDS)
    finally:
        stop.set()
        for thread in workers:
            thread.join()
        stop_file.touch()
        out, _ = swapper.communicate(timeout=60)
    assert swapper.returncode == 0
    assert int(out) > 0  # the swap really happened
    changed = {k: v for k, v in tree_snapshot(outside).items() if before.get(k) != v}
    changed.update({k: "deleted" for k in before if k not in tree_snapshot(outside)})
    print(f"swaps={out.strip()} calls={dict(calls)} escapes={dict(escapes)} "
          f"changed_outside={sorted(changed)[:10]} ({len(changed)})")
    assert dict(escapes) == {}
    assert changed == {}
    assert min(calls.values()) > 0


# --------------------------------------------------------------------------- link rules


def test_links_inside_the_root_are_followed_and_links_out_refused(
    tmp_path: Path, resolution: str
) -> None:
    """Both resolutions give the same answers: in-root links work, any way out is refused."""
    root = tmp_path / "root"
    (root / "real" / "sub").mkdir(parents=True)
    (root / "real" / "data.txt").write_text("value\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.txt").write_text(SECRET)
    (root / "rel").symlink_to("real")  # relative, inside
    (root / "abs").symlink_to(root / "real")  # absolute, inside
    (root / "real" / "sub" / "up").symlink_to("../data.txt")  # `..` that stays inside
    (root / "climb").symlink_to("real/../../outside")  # `..` above the root
    (root / "out").symlink_to(outside)  # absolute, outside
    (root / "loop").symlink_to("loop")
    vfs = FilesystemBackend(root, virtual_mode=True)
    for path in ("/rel/data.txt", "/abs/data.txt", "/real/sub/up", "/abs/sub/up"):
        assert vfs.read(path).file_data["content"] == "value\n", path
    assert vfs.write("/abs/sub/new.txt", "n").error is None
    assert (root / "real" / "sub" / "new.txt").read_text() == "n"
    for path in ("/climb/data.txt", "/out/data.txt"):
        for result in (vfs.read(path), vfs.write(path + "2", "x"), vfs.edit(path, "TOP", "x")):
            assert result.error.kind == ErrorKind.OUTSIDE_ROOT, path
            assert result.error.path.startswith(path)
    loop = vfs.read("/loop").error
    assert (loop.kind, loop.detail) == (ErrorKind.FAILED, "Too many levels of symbolic links")
    assert sorted(p["path"] for p in vfs.ls("/").entries) == ["/abs/", "/real/", "/rel/"]
    assert (outside / "data.txt").read_text() == SECRET
    assert sorted(os.listdir(outside)) == ["data.txt"]


def test_an_absolute_link_into_the_root_falls_back_from_the_kernel_to_the_walk(
    tmp_path: Path,
) -> None:
    """`openat2(RESOLVE_BENEATH)` refuses every absolute link; the walk decides instead."""
    if _beneath._Openat2.get() is None:
        pytest.skip("this kernel has no usable openat2")
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "abs").symlink_to(root / "real")
    kernel = _beneath._Openat2.get()
    assert kernel is not None
    fd = os.open(root, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as refused:
            kernel.open(fd, "abs", os.O_RDONLY)
    finally:
        os.close(fd)
    assert refused.value.errno == 18  # EXDEV
    vfs = FilesystemBackend(root, virtual_mode=True)
    assert vfs.write("/abs/a.txt", "a").error is None
    assert (root / "real" / "a.txt").read_text() == "a"
