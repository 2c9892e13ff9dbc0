"""tasks.py and the build host's settings table: each task's --help lists every setting it
reads, from the table (torchpod_toolkit.settings), and a task refuses a bad value of one in
one line, exit 2, before its body runs."""

from __future__ import annotations

import inspect

import pytest
from invoke import Context, Exit

from torchpod_toolkit import settings

from tasks_cli import load_tasks

TASKS = load_tasks("tasks_settings_under_test")
NS = TASKS.ns
READERS = sorted({task for which in settings.SETTINGS for task in which.commands})


@pytest.mark.parametrize("path", READERS)
def test_each_task_that_reads_a_setting_lists_it_in_its_help(path):
    assert path in NS.task_names, f"the settings table names a task tasks.py does not have: {path}"
    doc = inspect.getdoc(NS[path])  # what `invoke --help` prints
    assert settings.help_section(path) in doc
    assert all(which.name in doc for which in settings.read_by(path))


def test_the_aliases_list_them_too():
    for old, path in TASKS.ALIASES.items():
        assert settings.help_section(path) in inspect.getdoc(NS[old]), old
        assert NS[old].path == path


def test_a_task_that_reads_none_lists_none():
    quiet = [p for p in NS.task_names if not settings.read_by(NS[p].path)]
    assert "image.push" in quiet and all("Environment:" not in inspect.getdoc(NS[p]) for p in quiet)


def test_every_task_knows_its_name_in_the_table():
    assert all(NS[path].path == path for path in NS.task_names if path not in TASKS.ALIASES)


def test_a_bad_value_stops_the_task_before_its_body_in_one_line(monkeypatch):
    ran = []
    task = TASKS._Task(lambda c: ran.append(c))
    task.path = "test"
    monkeypatch.setenv(settings.PRUNE_BUILD_CACHE.name, "yes")
    with pytest.raises(Exit) as caught:
        task(Context())
    assert caught.value.code == 2 and not ran
    assert caught.value.message.startswith(f"torchpod: {settings.PRUNE_BUILD_CACHE.name}='yes' is not a switch; "
                                           "expected 1 or 0")
    assert "\n" not in caught.value.message
    monkeypatch.setenv(settings.PRUNE_BUILD_CACHE.name, "1")
    task(Context())
    assert len(ran) == 1


def test_the_real_test_task_checks_before_it_runs_anything(monkeypatch):
    monkeypatch.setenv(settings.REQUIRE_TOOLS.name, "true")

    class Refusing(Context):
        def run(self, command, **kwargs):
            raise AssertionError(f"ran {command} with a bad setting")

    with pytest.raises(Exit) as caught:
        NS["test"](Refusing(), tier="unit", setup=True)
    assert caught.value.code == 2 and settings.REQUIRE_TOOLS.name in caught.value.message
