"""`BubblewrapSandbox`'s seccomp filter: what it refuses, and what still works under it.

A probe inside a real sandbox makes each refused system call directly (`syscall(2)` through
ctypes, with harmless arguments) and reports its errno; the same workloads an agent runs
(Python, shell pipelines, git, pip from a local wheel, a C compiler) must still work. The
battery runs as root and, through `setpriv`, as an ordinary user.
"""

from __future__ import annotations

import json
import shutil
import textwrap
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
from fathom.backends.shell.seccomp import DENIED_SYSCALLS, SeccompProfile

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=needs("bubblewrap"))

try:
    import pyseccomp
except (ImportError, RuntimeError):  # RuntimeError: pyseccomp found no libseccomp
    pytest.skip(needs("libseccomp"), allow_module_level=True)

_NEW_USER_CLONE = 0x10000000 | 17  # CLONE_NEWUSER | SIGCHLD
_CALLS: dict[str, tuple[str, tuple[int, ...]]] = {
    # name in the report: (system call, arguments), each harmless if it were let through
    **{name: (name, ()) for name in sorted(DENIED_SYSCALLS)},
    "ptrace": ("ptrace", (0,)),  # PTRACE_TRACEME
    "keyctl": ("keyctl", (0, -3, 0)),  # KEYCTL_GET_KEYRING_ID of the session keyring
    "iopl": ("iopl", (0,)),
    "setns": ("setns", (-1, 0)),
    "unshare(CLONE_NEWUSER)": ("unshare", (0x10000000,)),
    "unshare(CLONE_NEWNET)": ("unshare", (0x40000000,)),
    "clone(CLONE_NEWUSER)": ("clone", (_NEW_USER_CLONE, 0, 0, 0, 0)),
    "clone3": ("clone3", (0, 0)),
    "personality(ADDR_NO_RANDOMIZE)": ("personality", (0x0040000,)),
    "personality(query)": ("personality", (0xFFFFFFFF,)),
    "personality(PER_LINUX32)": ("personality", (0x0008,)),
    "socket(AF_INET)": ("socket", (2, 1, 0)),
    "socket(AF_INET6)": ("socket", (10, 1, 0)),
    "socket(AF_PACKET)": ("socket", (17, 3, 0)),
    "socket(AF_NETLINK, NETLINK_ROUTE)": ("socket", (16, 3, 0)),
    "socket(AF_UNIX)": ("socket", (1, 1, 0)),
}


def _numbered() -> list[tuple[str, int, tuple[int, ...]]]:
    """`(report name, native number, arguments)` of every probed call this machine has."""
    rows = []
    for label, (name, args) in _CALLS.items():
        number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
        if number >= 0:
            rows.append((label, number, args))
    return rows


PROBE = textwrap.dedent(
    """
    import ctypes, errno, json, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    report = {}
    for label, number, args in json.loads(sys.argv[1]):
        ctypes.set_errno(0)
        result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
        report[label] = "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
    print(json.dumps(report))
    """
)

BATTERY = textwrap.dedent(
    '''
    import json, os, shlex, shutil, zipfile

    def make_wheel(ws):
        """A pure-Python wheel, `demo_pkg` 0.1, in the workspace."""
        name = "demo_pkg-0.1-py3-none-any.whl"
        files = {
            "demo_pkg/__init__.py": "VALUE = 'from the wheel'\\n",
            "demo_pkg-0.1.dist-info/METADATA": (
                "Metadata-Version: 2.1\\nName: demo-pkg\\nVersion: 0.1\\n"
            ),
            "demo_pkg-0.1.dist-info/WHEEL": (
                "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\n"
                "Tag: py3-none-any\\n"
            ),
        }
        record = "".join(f"{path},,\\n" for path in files)
        with zipfile.ZipFile(os.path.join(ws, name), "w") as wheel:
            for path, text in files.items():
                wheel.writestr(path, text)
            info = "demo_pkg-0.1.dist-info/RECORD"
            wheel.writestr(info, record + info + ",,\\n")
        return name

    def run_battery(box, ws, probe, calls):
        wheel = make_wheel(ws)
        commands = {
            "probe": "python3 -c " + shlex.quote(probe) + " " + shlex.quote(json.dumps(calls)),
            "python": "python3 -c 'import threading; t = threading.Thread(target=print, "
                      "args=(sum(range(10)),)); t.start(); t.join()'",
            "pipeline": "seq 1 100 | grep 7 | sort -rn | head -n 2 | tr '\\\\n' ' '",
            "git": "git init -q repo && cd repo && echo hi > a.txt && git add a.txt && "
                   "git -c user.name=t -c user.email=t@example.com commit -qm one && "
                   "git log --oneline | wc -l",
            "pip": "python3 -m pip install -q --no-index --no-deps --no-cache-dir "
                   "--disable-pip-version-check --target site ./" + wheel + " && "
                   "PYTHONPATH=site python3 -c 'import demo_pkg; print(demo_pkg.VALUE)'",
        }
        if shutil.which("cc"):
            with open(os.path.join(ws, "hello.c"), "w") as source:
                source.write('#include <stdio.h>\\nint main(void) { puts("compiled"); }\\n')
            commands["cc"] = "cc -o hello hello.c && ./hello"
        report = {"uid": os.getuid()}
        for name, command in commands.items():
            result = box.execute(command)
            report[name] = [result.output, result.exit_code]
        return report
    '''
)


def _battery(box: BubblewrapSandbox, workspace: Path) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(BATTERY, namespace)
    return namespace["run_battery"](box, str(workspace), PROBE, _numbered())


def _probe(box: BubblewrapSandbox) -> dict[str, str]:
    import shlex

    command = "python3 -c " + shlex.quote(PROBE) + " " + shlex.quote(json.dumps(_numbered()))
    result = box.execute(command)
    assert result.exit_code == 0, result.output
    return json.loads(result.output.splitlines()[0])


def _check(report: dict[str, Any]) -> None:
    """Every refused call failed as the profile says; every workload worked."""
    assert report["probe"][1] == 0, report["probe"][0]
    # The first answer may end with a note on the limits this sandbox falls back to.
    errnos = json.loads(report["probe"][0].splitlines()[0])
    allowed = {"personality(query)", "personality(PER_LINUX32)", "socket(AF_UNIX)"}
    expected = {label: "EPERM" for label in errnos}
    expected.update({label: "ok" for label in allowed if label in errnos})
    expected["clone3"] = "ENOSYS"
    assert errnos == expected
    assert report["python"] == ["45\n", 0]
    assert report["pipeline"] == ["97 87 ", 0]
    assert report["git"] == ["1\n", 0], report["git"]
    assert report["pip"] == ["from the wheel\n", 0], report["pip"]
    if "cc" in report:
        assert report["cc"] == ["compiled\n", 0], report["cc"]


def test_denied_calls_fail_with_eperm_and_workloads_run_as_root(tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("this run is unprivileged: the ordinary-user test covers it")
    box = BubblewrapSandbox(tmp_path, timeout=120)
    _check(_battery(box, tmp_path))


def test_denied_calls_fail_with_eperm_and_workloads_run_as_an_ordinary_user() -> None:
    if not ROOT:
        pytest.skip(ORDINARY_USER_SKIP)
    script = (
        BATTERY
        + textwrap.dedent(
            """
            import sys
            from fathom.backends.shell.bubblewrap import BubblewrapSandbox
            box = BubblewrapSandbox(sys.argv[1], timeout=120)
            report = run_battery(box, sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
            print(json.dumps(report))
            """
        )
    )
    with user_workspace() as workspace:
        report = as_ordinary_user(script, str(workspace), PROBE, json.dumps(_numbered()))
    assert report["uid"] == USER_UID
    _check(report)


def test_the_filter_is_what_refuses_them(tmp_path: Path) -> None:
    # The same calls in the same sandbox without the filter: these succeed or fail for
    # another reason, so the EPERM (or ENOSYS) above comes from the profile, not from
    # capabilities the sandbox lacks.
    filtered = _probe(BubblewrapSandbox(tmp_path, timeout=120))
    unfiltered = _probe(BubblewrapSandbox(tmp_path, timeout=120, seccomp=None))
    changed = {label for label in filtered if filtered[label] != unfiltered[label]}
    assert {
        "ptrace", "keyctl", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
        "clone3", "unshare(CLONE_NEWUSER)", "clone(CLONE_NEWUSER)",
        "personality(ADDR_NO_RANDOMIZE)", "socket(AF_INET)", "socket(AF_INET6)",
        "socket(AF_NETLINK, NETLINK_ROUTE)",
    } <= changed
    assert unfiltered["socket(AF_INET)"] == unfiltered["ptrace"] == "ok"


def test_network_sockets_are_allowed_with_the_network_on(tmp_path: Path) -> None:
    report = _probe(BubblewrapSandbox(tmp_path, timeout=120, network=True))
    for family in ("AF_INET", "AF_INET6", "AF_UNIX"):
        assert report[f"socket({family})"] == "ok", (family, report)
    assert report["ptrace"] == "EPERM"  # the rest of the profile still applies


def test_the_profile_can_be_extended_and_narrowed(tmp_path: Path) -> None:
    box = BubblewrapSandbox(tmp_path, timeout=120, seccomp=SeccompProfile().deny("chroot"))
    chroot = box.execute("python3 -c \"import os; os.chroot('/tmp')\"")
    assert "Operation not permitted" in chroot.output
    narrow = BubblewrapSandbox(tmp_path, timeout=120, seccomp=SeccompProfile().allow("ptrace"))
    assert _probe(narrow)["ptrace"] == "ok"
    with pytest.raises(ValueError, match="unknown system call 'no_such_call'"):
        BubblewrapSandbox(tmp_path, seccomp=SeccompProfile().deny("no_such_call"))
