"""`BubblewrapSandbox` on its workspace overlay: an exact disk budget, transactional commands.

Every command writes to an overlay whose changes reach the workspace only when it finishes
in time and within `max_disk_mb`. The tests look at the workspace on the host afterwards:
a command over the budget, killed at its timeout, or cancelled leaves it exactly as it
was; one within the budget leaves it as the same command leaves it without the overlay.
The budget tests also run as an ordinary user.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import stat
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from tests.backends.sandbox_users import (
    ORDINARY_USER_SKIP,
    ROOT,
    USER_UID,
    as_ordinary_user,
    user_workspace,
)
from tests.system_requirements import needs

from fathom.backends.shell.bubblewrap import BubblewrapSandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=needs("bubblewrap"))

HANG_S = 120
"""The timeout of commands that must finish: it only bounds a hang on a loaded machine."""
MIB = 1024 * 1024


def _state(root: Path) -> dict[str, Any]:
    """What a workspace holds: per path, its type, permission bits, owner and content
    (a digest, a link's target), plus which names are hard links of one file."""
    found: dict[str, Any] = {}
    inodes: dict[int, list[str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            info = os.lstat(full)
            entry: dict[str, Any] = {
                "type": stat.S_IFMT(info.st_mode),
                "mode": oct(stat.S_IMODE(info.st_mode)),
                "owner": (info.st_uid, info.st_gid),
            }
            if stat.S_ISREG(info.st_mode):
                with open(full, "rb") as handle:
                    entry["sha"] = hashlib.sha256(handle.read()).hexdigest()
                entry["size"] = info.st_size
                if info.st_nlink > 1:
                    inodes.setdefault(info.st_ino, []).append(rel)
            elif stat.S_ISLNK(info.st_mode):
                entry["target"] = os.readlink(full)
            found[rel] = entry
    found["<hard links>"] = sorted(sorted(names) for names in inodes.values())
    return found


def _preload(root: Path) -> None:
    """The workspace every test starts from."""
    (root / "keep.txt").write_text("kept\n")
    (root / "gone.txt").write_text("to delete\n")
    (root / "rename-me.txt").write_text("renamed\n")
    (root / "private.txt").write_text("secret\n")
    for folder in ("olddir/sub", "lowerdir", "replaced", "dir-to-file", "nest/inner/deep"):
        (root / folder).mkdir(parents=True)
    (root / "olddir" / "sub" / "f").write_text("old\n")
    (root / "lowerdir" / "inside.txt").write_text("inside\n")
    (root / "replaced" / "old-only").write_text("old\n")
    (root / "file-to-dir").write_text("a file\n")
    (root / "nest" / "inner" / "deep" / "leaf").write_text("leaf\n")


CHANGES = textwrap.dedent(
    """\
    set -e
    echo new > new.txt
    echo more >> keep.txt
    rm gone.txt
    rm -r olddir
    mkdir -p made/deep && echo deep > made/deep/f
    mv rename-me.txt renamed.txt
    mv made made-moved
    mv lowerdir lowerdir-moved
    mv nest nest2 && mv nest2/inner nest2/inner2 && echo more >> nest2/inner2/deep/leaf
    ln -s new.txt link
    ln new.txt hard
    mkfifo pipe
    truncate -s 60M sparse
    printf x > setuid && chmod 4755 setuid
    chmod 600 private.txt
    touch -d '2001-02-03 04:05:06' dated
    rm -r replaced && mkdir replaced && echo fresh > replaced/only
    rm file-to-dir && mkdir file-to-dir && echo in > file-to-dir/x
    rmdir dir-to-file && echo now-a-file > dir-to-file
    echo done
    """
)
"""Every kind of change a command makes: new, appended, deleted, renamed (a file and a
directory that were there before, and one it made), links, a FIFO, a sparse file, a
setuid bit, a mode, a timestamp, a directory replaced, a file made a directory and back."""


def _sandbox(root: Path, **options: Any) -> BubblewrapSandbox:
    return BubblewrapSandbox(root, timeout=HANG_S, **options)


# --------------------------------------------------------------------- within the budget


def test_a_command_within_the_budget_has_all_its_changes_applied(tmp_path: Path) -> None:
    # The same command on the overlay and directly on a copy (overlay=False) leaves the
    # two workspaces the same.
    on_overlay, direct = tmp_path / "overlay", tmp_path / "direct"
    for root in (on_overlay, direct):
        root.mkdir()
        _preload(root)
    overlay_box = _sandbox(on_overlay, max_disk_mb=64)
    assert overlay_box.disk_limit == "overlay"
    plain_box = _sandbox(direct, max_disk_mb=64, overlay=False)
    results = [box.execute(CHANGES) for box in (overlay_box, plain_box)]
    for result in results:
        assert (result.output, result.exit_code) == ("done\n", 0), result.output
    assert _state(on_overlay) == _state(direct)
    applied = on_overlay
    assert not os.lstat(applied / "setuid").st_mode & stat.S_ISUID
    assert os.stat(applied / "dated").st_mtime == time.mktime((2001, 2, 3, 4, 5, 6, 0, 0, -1))
    assert os.stat(applied / "sparse").st_blocks * 512 < MIB  # still sparse on disk
    assert stat.S_ISFIFO(os.lstat(applied / "pipe").st_mode)


def test_the_file_tools_see_a_command_s_changes_and_the_command_sees_theirs(
    tmp_path: Path,
) -> None:
    box = _sandbox(tmp_path, max_disk_mb=8)
    assert box.write("/from-tool.txt", "tool\n").error is None
    result = box.execute(
        "cat from-tool.txt && echo cmd > from-cmd.txt && echo tool2 >> from-tool.txt"
    )
    assert result.output == "tool\n"
    assert box.read("/from-cmd.txt").file_data["content"] == "cmd\n"  # type: ignore[index]
    assert box.edit("/from-tool.txt", "tool2", "edited").error is None
    assert box.execute("cat from-tool.txt").output == "tool\nedited\n"


def test_renaming_a_directory_that_was_there_works_as_root(tmp_path: Path) -> None:
    # As root the overlay records renamed directories (redirect_dir), so rename(2) of a
    # directory the command did not make works (as an ordinary user it fails with EXDEV,
    # and `mv` copies instead); `git mv` of a directory is the common case.
    if not ROOT:
        pytest.skip("an ordinary user's overlay cannot rename such a directory (EXDEV)")
    box = _sandbox(tmp_path, max_disk_mb=64)
    setup = box.execute(
        "git init -q . && mkdir -p src/pkg && echo a > src/pkg/a.py && git add . && "
        "git -c user.name=t -c user.email=t@example.com commit -qm one && echo ok"
    )
    assert setup.output == "ok\n", setup.output
    rename = "python3 -c \"import os; os.rename('lib/pkg', 'lib/p')\""
    moved = box.execute(f"git mv src lib && {rename}")
    assert moved.exit_code == 0, moved.output
    assert (tmp_path / "lib" / "p" / "a.py").read_text() == "a\n"
    assert not (tmp_path / "src").exists()
    status = box.execute("git status --porcelain").output
    assert status == "RD src/pkg/a.py -> lib/pkg/a.py\n?? lib/p/\n", status


# --------------------------------------------------------------------- over the budget

OVER_BUDGET = (
    "echo more >> keep.txt; rm gone.txt; "
    "for i in 1 2 3 4; do head -c 7M /dev/zero > f$i || break; done; echo end"
)
"""Changes a pre-existing file, deletes one, then writes 7 MB files in a loop."""


def _check_over_budget(result_output: str, exit_code: int, before: Any, after: Any) -> None:
    assert "No space left on device" in result_output
    assert "none of its changes were applied" in result_output, result_output
    assert "max_disk_mb=8" in result_output
    assert exit_code == 1  # the loop's `echo end` exited 0, but nothing it did was kept
    assert after == before  # keep.txt unchanged, gone.txt still there, no f*


def test_a_command_over_the_budget_changes_nothing(tmp_path: Path) -> None:
    _preload(tmp_path)
    box = _sandbox(tmp_path, max_disk_mb=8)
    before = _state(tmp_path)
    result = box.execute(OVER_BUDGET)
    _check_over_budget(result.output, result.exit_code or 0, before, _state(tmp_path))
    # An exact fit is within it: 8 MiB in all is applied.
    fit = box.execute("head -c 8M /dev/zero > exact && echo ok")
    assert (fit.output, fit.exit_code) == ("ok\n", 0), fit.output
    assert (tmp_path / "exact").stat().st_size == 8 * MIB


def test_a_command_over_the_budget_changes_nothing_as_an_ordinary_user() -> None:
    if not ROOT:
        pytest.skip(ORDINARY_USER_SKIP)
    script = textwrap.dedent(
        f"""
        import json, os, sys
        from fathom.backends.shell.bubblewrap import BubblewrapSandbox
        ws = sys.argv[1]
        with open(os.path.join(ws, "keep.txt"), "w") as handle:
            handle.write("kept\\n")
        with open(os.path.join(ws, "gone.txt"), "w") as handle:
            handle.write("to delete\\n")
        box = BubblewrapSandbox(ws, timeout={HANG_S}, max_disk_mb=8)
        before = sorted(os.listdir(ws)), open(os.path.join(ws, "keep.txt")).read()
        over = box.execute(sys.argv[2])
        after = sorted(os.listdir(ws)), open(os.path.join(ws, "keep.txt")).read()
        within = box.execute("echo ok > ok.txt && mkdir d && chmod 000 ok.txt && echo fine")
        info = os.stat(os.path.join(ws, "ok.txt"))
        print(json.dumps({{
            "mode": box.disk_limit, "over": [over.output, over.exit_code],
            "before": before, "after": after, "within": [within.output, within.exit_code],
            "ok": [info.st_uid, oct(info.st_mode & 0o777)],
            "d": os.path.isdir(os.path.join(ws, "d")),
        }}))
        """
    )
    with user_workspace() as workspace:
        report = as_ordinary_user(script, str(workspace), OVER_BUDGET)
    assert report["mode"] == "overlay"
    over_output, over_code = report["over"]
    assert "none of its changes were applied" in over_output, over_output
    assert over_code == 1
    assert report["after"] == report["before"]
    assert report["within"][0].startswith("fine\n"), report["within"]
    assert report["ok"] == [USER_UID, "0o0"]
    assert report["d"] is True


# --------------------------------------------------------------------- killed commands


def test_a_command_killed_at_its_timeout_changes_nothing(tmp_path: Path) -> None:
    _preload(tmp_path)
    box = _sandbox(tmp_path, max_disk_mb=8)
    before = _state(tmp_path)
    result = box.execute("echo more >> keep.txt; rm gone.txt; touch new; sleep 1041", timeout=3)
    assert result.exit_code == 124
    assert "none of its changes were applied" in result.output, result.output
    assert _state(tmp_path) == before
    quiet = box.execute("sleep 1042", timeout=1)  # changed nothing: nothing to say about it
    assert quiet.exit_code == 124
    assert "changes" not in quiet.output


async def test_a_cancelled_command_changes_nothing(tmp_path: Path) -> None:
    _preload(tmp_path)
    box = _sandbox(tmp_path, max_disk_mb=8)
    before = _state(tmp_path)
    task = asyncio.create_task(box.aexecute("echo more >> keep.txt; touch started; sleep 1043"))
    deadline = time.monotonic() + 60  # bounds a slow start only
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        found = await asyncio.create_subprocess_exec(
            "pgrep", "-f", "sleep 1043", stdout=asyncio.subprocess.DEVNULL
        )
        if await found.wait() == 0:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _state(tmp_path) == before


def test_a_command_killed_at_the_output_cap_changes_nothing(tmp_path: Path) -> None:
    box = _sandbox(tmp_path, max_disk_mb=8)
    result = box.execute("touch made; yes")
    assert result.truncated is True
    assert "none of its changes were applied" in result.output.rsplit("\n", 1)[-1]
    assert not (tmp_path / "made").exists()


# --------------------------------------------------------------------- the fallback


def test_without_overlays_the_guard_is_used_and_the_first_answer_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # An old bwrap (before 0.5, no --perms) stands in for any place the overlay cannot be
    # set up: the real bwrap, refusing that one option.
    real = shutil.which("bwrap")
    assert real is not None
    # Not under /tmp: the sandbox's first stage has a /tmp of its own.
    fake_dir = Path(tempfile.mkdtemp(prefix="fathom-old-bwrap-", dir="/var/tmp"))
    fake_dir.chmod(0o755)  # as root, the sandbox user runs the inner bwrap too
    request.addfinalizer(lambda: shutil.rmtree(fake_dir))
    fake = fake_dir / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = --perms ] && { echo "bwrap: Unknown option --perms" >&2; '
        "exit 1; }; done\n"
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_dir}:{os.environ['PATH']}")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    box = _sandbox(workspace, max_disk_mb=8)
    assert box.disk_limit == "guard"
    first = box.execute("echo hi")
    assert first.output.startswith("hi\n")
    assert "[disk budget: no workspace overlay here (" in first.output
    assert "Unknown option --perms" in first.output
    assert box.execute("echo again").output == "again\n"  # said once


def test_no_disk_budget_means_no_overlay(tmp_path: Path) -> None:
    box = _sandbox(tmp_path, max_disk_mb=None)
    assert box.disk_limit == "none"
    assert box.execute("echo x > a && echo ok").output == "ok\n"
    assert (tmp_path / "a").read_text() == "x\n"


def test_the_overlay_s_bookkeeping_is_gone_after_each_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temporary = tmp_path / "tmp"  # where this test's control directories go
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    workspace = tmp_path / "ws"
    box = _sandbox(workspace, max_disk_mb=8)
    for command in ("true", "echo x > f", "sleep 1044"):
        box.execute(command, timeout=2)
    assert os.listdir(temporary) == []
    assert json.dumps(sorted(os.listdir(workspace))) == '["f"]'
