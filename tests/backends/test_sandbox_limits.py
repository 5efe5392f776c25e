"""`BubblewrapSandbox`'s memory and process limits without root.

An ordinary user gets per-command cgroups from a cgroup subtree delegated to it (here: one
root makes, gives to the throwaway uid and starts the child in, as systemd does with
`Delegate=yes`); without one the limits fall back to rlimits, and the first answer says so.
"""

from __future__ import annotations

import os
import secrets
import shutil
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from tests.backends.sandbox_users import (
    ORDINARY_USER_SKIP,
    ROOT,
    USER_UID,
    as_ordinary_user,
    user_workspace,
)
from tests.system_requirements import needs

from fathom.backends.shell.cgroups import find_own_cgroup, remove_cgroup

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=needs("bubblewrap"))

REPORT = textwrap.dedent(
    """
    import json, sys
    from fathom.backends.shell.bubblewrap import BubblewrapSandbox
    box = BubblewrapSandbox(sys.argv[1], timeout=120, max_processes=32, max_memory_mb=512)
    report = {"process_limit": box.process_limit, "memory_limit": box.memory_limit}
    for name, command in json.loads(sys.argv[2]).items():
        result = box.execute(command)
        report[name] = [result.output, result.exit_code]
    print(json.dumps(report))
    """
)
FORKS = (
    'python3 -c "\n'
    "import os, time\n"
    "try:\n"
    "    for _ in range(100):\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(30)\n"
    "            os._exit(0)\n"
    "except OSError as error:\n"
    "    print('fork failed:', error.strerror)\n"
    '"'
)
HOGS = " ".join(
    ["python3 -c \"x = b'x' * (200 << 20); import time; time.sleep(3); print('survived')\" &"]
    * 4
) + " wait"
"""Four processes of 200 MiB each: every one within RLIMIT_AS, together over 512 MiB."""


@contextmanager
def _delegated_cgroups(uid: int) -> Iterator[list[str]]:
    """A child of this process's pids and memory cgroups, given to `uid` (as a delegated
    subtree is); yields the `cgroup.procs` files a process joins to be in both."""
    made = []
    for controller in ("pids", "memory"):
        base = find_own_cgroup(controller)
        if base is None or base.version != 1:
            pytest.skip(f"needs a writable cgroup v1 {controller} hierarchy to delegate")
        path = os.path.join(base.path, f"fathom-delegated-{secrets.token_hex(4)}")
        os.mkdir(path)
        made.append(path)
        for entry in [path, *(os.path.join(path, name) for name in os.listdir(path))]:
            os.chown(entry, uid, uid)
    try:
        yield [os.path.join(path, "cgroup.procs") for path in made]
    finally:
        for path in made:
            for child in os.listdir(path):
                if os.path.isdir(os.path.join(path, child)):
                    remove_cgroup(os.path.join(path, child))
            remove_cgroup(path)


def test_an_ordinary_user_s_delegated_cgroup_bounds_memory_and_processes() -> None:
    if not ROOT:
        pytest.skip(ORDINARY_USER_SKIP)
    import json

    with _delegated_cgroups(USER_UID) as procs, user_workspace() as workspace:
        joins = " && ".join(f'echo $$ > "{path}"' for path in procs)
        prefix = ["/bin/sh", "-c", f'{joins} && exec "$@"', "join"]
        commands = {"first": "echo first", "forks": FORKS, "hogs": HOGS}
        report = as_ordinary_user(REPORT, str(workspace), json.dumps(commands), prefix=prefix)
    assert report["process_limit"] == "cgroup"
    assert report["memory_limit"] == "cgroup"
    assert report["first"] == ["first\n", 0]  # no fallback to state
    assert "fork failed: Resource temporarily unavailable" in report["forks"][0]
    hogs_output = report["hogs"][0]
    assert "memory limit" in hogs_output, hogs_output
    assert hogs_output.count("survived") < 4


def test_without_a_cgroup_the_first_answer_states_the_fallback() -> None:
    if not ROOT:
        pytest.skip(ORDINARY_USER_SKIP)
    import json

    commands = {"first": "echo first", "second": "echo second"}
    with user_workspace() as workspace:
        report = as_ordinary_user(REPORT, str(workspace), json.dumps(commands))
    if report["process_limit"] == "cgroup":
        pytest.skip("this machine gives the throwaway user a cgroup (a systemd scope)")
    first, _ = report["first"]
    assert first.startswith("first\n")
    assert f"max_processes=32 counts every process of host uid {USER_UID}" in first
    assert "max_memory_mb=512 bounds each process (RLIMIT_AS)" in first
    assert report["second"] == ["second\n", 0]
