"""The real `fathom` command in scripts: the task from stdin, `--version`, a checked
`--project`, quiet closed pipes, and tool names in approvals checked against the agent.

Each test runs the installed console script as a subprocess, with a scripted model served
over HTTP (conftest.py); stdin and stdout are real pipes.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from .conftest import FATHOM, FathomProject, human_texts

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

CLOSED_PIPE = 141


def _run(fp: FathomProject, *args: str, stdin: str | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The command with `stdin` piped in (an empty pipe when None), output captured."""
    return subprocess.run(
        [str(FATHOM), *args], cwd=fp.project, env=fp.env, input=stdin or "",
        capture_output=True, text=True, encoding="utf-8", timeout=timeout, check=False,
    )


def _model_turns(fp: FathomProject) -> list[str]:
    """The last human message of every model request, in order."""
    assert fp.model is not None
    return [(human_texts(r.messages) or [""])[-1] for r in fp.model.requests]


# --------------------------------------------------------------------------- stdin


def test_run_dash_reads_the_whole_task_from_stdin(fathom_project: FathomProject) -> None:
    done = _run(fathom_project, "run", "-", stdin="summarize the repo\nin two lines\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _model_turns(fathom_project) == ["summarize the repo\nin two lines"]
    assert "you said 'summarize the repo\\nin two lines'" in done.stdout


def test_run_without_a_task_reads_piped_stdin(fathom_project: FathomProject) -> None:
    done = _run(fathom_project, "run", "--json", stdin="list the files")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _model_turns(fathom_project) == ["list the files"]
    assert '"answer": "you said \'list the files\'"' in done.stdout


def test_plain_fathom_with_piped_stdin_runs_it_as_one_task(fathom_project: FathomProject) -> None:
    done = _run(fathom_project, "--plain", stdin="first line\nsecond line\n")
    assert done.returncode == 0, done.stdout + done.stderr
    # One task, not one message per line, and no interactive prompt.
    assert _model_turns(fathom_project) == ["first line\nsecond line"]
    assert "you said 'first line\\nsecond line'" in done.stdout
    assert "› " not in done.stdout.replace("model › ", "")


@pytest.mark.parametrize("args", [("run", "-"), ("run",), ()])
def test_empty_stdin_is_a_usage_error_and_reaches_no_model(
    fathom_project: FathomProject, args: tuple[str, ...]
) -> None:
    done = _run(fathom_project, *args, stdin=" \n\n")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no task on standard input" in done.stderr
    assert "Traceback" not in done.stderr
    assert _model_turns(fathom_project) == []


# --------------------------------------------------------------------------- --version, --project


def test_version_prints_the_installed_package_version(bare_project: FathomProject) -> None:
    done = _run(bare_project, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"fathom {metadata.version('fathom')}"


@pytest.mark.parametrize("command", [(), ("run", "hi"), ("threads",)])
def test_a_project_that_is_not_a_directory_is_one_line_and_exit_2(
    fathom_project: FathomProject, command: tuple[str, ...]
) -> None:
    fp = fathom_project
    missing = fp.project / "no-such-dir"
    a_file = fp.write("README.md", "hello\n")
    for target, why in ((missing, "no such directory"), (a_file, "not a directory")):
        done = _run(fp, "--project", str(target), *command, stdin="a task")
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.strip() == f"--project {target}: {why}"
    assert _model_turns(fp) == []


# --------------------------------------------------------------------------- closed pipes


def _with_closed_stdout(fp: FathomProject, *args: str) -> tuple[int, str]:
    """Run the command with stdout a pipe whose read end is closed before it writes."""
    process = subprocess.Popen(
        [str(FATHOM), *args], cwd=fp.project, env=fp.env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
    )
    assert process.stdout is not None
    process.stdout.close()  # as `| head -c 10` does once it has read enough
    _out, err = process.communicate(timeout=60)
    return process.returncode, err


@pytest.mark.parametrize("args", [("threads",), ("run", "--json", "hello"), ("--version",)])
def test_a_closed_stdout_pipe_ends_quietly(fathom_project: FathomProject,
                                           args: tuple[str, ...]) -> None:  # fmt: skip
    code, err = _with_closed_stdout(fathom_project, *args)
    assert code == CLOSED_PIPE, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


# --------------------------------------------------------------------------- tool names


def test_a_misspelled_auto_approve_name_is_refused_with_the_nearest_tool(
    fathom_project: FathomProject,
) -> None:
    done = _run(fathom_project, "run", "--auto-approve", "read_file,wrte_file", "hello")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'wrte_file' (did you mean 'write_file'?)" in done.stderr
    assert "Traceback" not in done.stderr
    assert _model_turns(fathom_project) == [], "the model was called before the check"


def test_execute_is_a_known_tool_only_to_suggest_when_a_sandbox_is_on(
    fathom_project: FathomProject,
) -> None:
    done = _run(fathom_project, "run", "--sandbox", "local", "--auto-approve", "exeute", "hi")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'exeute' (did you mean 'execute'?)" in done.stderr
    assert _model_turns(fathom_project) == []


def test_auto_approve_with_server_is_refused_not_ignored(bare_project: FathomProject) -> None:
    # The server's graph decides its approvals: a local --auto-approve would do nothing.
    done = _run(bare_project, "--server", "http://127.0.0.1:9", "--auto-approve", "write_file")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--auto-approve cannot be used with --server" in done.stderr


def test_a_misspelled_interrupt_on_name_in_fathom_toml_is_refused(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    fp.write_config('interrupt_on = ["edit_fle"]\n')
    done = _run(fp, "run", "hello")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "interrupt_on" in done.stderr
    assert "'edit_fle' (did you mean 'edit_file'?)" in done.stderr
    assert _model_turns(fp) == []


def test_a_configuration_error_is_reported_before_stdin_is_read(
    bare_project: FathomProject,
) -> None:
    done = _run(bare_project, "run", "-", stdin="")  # no model configured, and nothing piped
    assert done.returncode == 2, done.stdout + done.stderr
    assert "fathom needs a model" in done.stderr
    assert "no task on standard input" not in done.stderr
