"""torchpod.commands: the commands as records, and every --help generated from the data
that decides what the launcher does (the records, torchrun's option table, the scheduler
registry, each workload's own parser, the settings table); nothing is a second list."""

from __future__ import annotations

import re

import pytest

from torchpod import commands
from torchpod.contract import SETTINGS, Setting
from torchpod.schedulers import SCHEDULERS
from torchpod.torchrun_flags import RESOLVED_OPTIONS, TORCHRUN_OPTIONS, spelling

NAME = re.compile(r"^  (TORCHPOD_[A-Z_]+)$", re.M)


def test_every_command_the_settings_name_has_a_record_and_the_other_way_round():
    assert {c.name for c in commands.COMMANDS} == {name for s in SETTINGS for name in s.commands}
    assert set(commands.WORKLOADS) == {w.module for w in (*commands.BENCHES.values(), commands.PREFLIGHT_WORKLOAD)}


@pytest.mark.parametrize("command", commands.COMMANDS, ids=lambda c: c.name)
def test_a_commands_help_lists_exactly_the_settings_it_reads(command):
    text = commands.command_help(command)
    assert text.startswith(f"usage: torchpod {command.synopsis}\n")
    assert NAME.findall(text) == [s.name for s in SETTINGS if command.name in s.commands]
    for option in command.options:
        assert option.flag in text and " ".join(option.meaning.split()[:4]) in " ".join(text.split())


@pytest.mark.parametrize("command", [commands.RUN, commands.PLAN], ids=lambda c: c.name)
def test_the_launching_commands_list_every_torchrun_option_from_its_table(command):
    flat = " ".join(commands.command_help(command).split())
    resolved, passed = flat.split("passed to torchrun as given:")
    for dest in TORCHRUN_OPTIONS:
        assert spelling(dest) in (resolved if dest in RESOLVED_OPTIONS else passed), dest


@pytest.mark.parametrize("workload", [*commands.BENCHES.values(), commands.PREFLIGHT_WORKLOAD],
                         ids=lambda w: w.module)
def test_a_workloads_help_is_its_own_parsers_with_the_settings_its_command_reads(workload):
    text = commands.workload_help(workload)
    parser = workload.parser()
    assert text.startswith(parser.format_usage().strip().split("\n")[0])
    for action in parser._actions:
        assert all(flag in text for flag in action.option_strings), action
    assert NAME.findall(text) == [s.name for s in SETTINGS if workload.command.name in s.commands]
    assert f"torchpod run -m {workload.module}" in text


def test_the_main_help_lists_every_scheduler_in_detection_order_from_the_registry():
    text = commands.main_help()
    block = text.split("forces one):\n", 1)[1].split("\n\n", 1)[0]
    assert [n.strip() for n in " ".join(block.split()).split(",")] == [m.NAME for m in SCHEDULERS]
    assert len(SCHEDULERS) >= 16
    for command in commands.COMMANDS:
        assert f"torchpod {command.synopsis}" in text and f"  {command.name:<10} {command.brief}" in text


def test_the_environment_section_follows_the_table_it_is_given():
    table = [Setting("TORCHPOD_A", "first", commands=("plan",)), Setting("TORCHPOD_B", "second", "2",
                                                                          commands=("doctor",))]
    assert NAME.findall(commands.environment_help(table)) == ["TORCHPOD_A", "TORCHPOD_B"]
    only = commands.environment_help(table, command="doctor")
    assert NAME.findall(only) == ["TORCHPOD_B"] and "(default: 2)" in only and "`torchpod doctor`" in only
