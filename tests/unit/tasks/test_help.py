"""Every task answers ``--help`` and ``-h`` with its usage and exit 0, through invoke's own
Program: no task has a positional argument that would take the flag as its value (a
required ``registry`` once answered `invoke push --help` with "--registry='--help'")."""

from __future__ import annotations

import pytest
from invoke import Program

from tasks_cli import load_tasks

TASKS = load_tasks("tasks_help_under_test")
NAMES = sorted(TASKS.ns.task_names)


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("name", NAMES)
def test_every_task_shows_its_help(name, flag, capsys):
    with pytest.raises(SystemExit) as done:
        Program(namespace=TASKS.ns, name="torchpod").run(["invoke", name, flag])
    out, err = capsys.readouterr()
    assert done.value.code in (0, None), err
    assert out.startswith("Usage: invoke [--core-opts] ") and f" {name} " in out.splitlines()[0], out[:300]


def test_no_task_takes_a_positional_argument():
    positional = {name: [a.name for a in TASKS.ns[name].get_arguments() if a.positional] for name in NAMES}
    assert {k: v for k, v in positional.items() if v} == {}
