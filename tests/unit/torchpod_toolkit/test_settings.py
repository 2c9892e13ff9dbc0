"""torchpod_toolkit.settings: every TORCHPOD_* variable the build host reads is declared once
with its form; a good value is taken, a bad one is one line naming the setting, the value and
the form expected; and no toolkit module, task or test helper reads such a variable by its
literal name or names one that no table holds."""

from __future__ import annotations

import ast
import re

import pytest

from torchpod import contract
from torchpod.contract import setting, switch
from torchpod.errors import InputError
from torchpod_toolkit import settings
from torchpod_toolkit.imagebuild import wheelhouse
from torchpod_toolkit.settings import PRUNE_BUILD_CACHE, REQUIRE_TOOLS, SETTINGS, WHEELHOUSE

from paths import ROOT

SWITCHES = [PRUNE_BUILD_CACHE, REQUIRE_TOOLS]


@pytest.mark.parametrize("which", SWITCHES, ids=lambda s: s.name)
@pytest.mark.parametrize("value, on", [("1", True), ("0", False), (" 1\n", True), ("", False), (None, False)])
def test_a_switch_takes_1_and_0_and_its_default_when_unset(which, value, on):
    env = {} if value is None else {which.name: value}
    assert switch(env, which) is on


@pytest.mark.parametrize("which", SWITCHES, ids=lambda s: s.name)
@pytest.mark.parametrize("value", ["yes", "true", "on", "2", "01", "1 1", "\u0661"])
def test_a_switch_refuses_anything_else_in_one_line(which, value):
    with pytest.raises(InputError) as caught:
        switch({which.name: value}, which)
    message = str(caught.value)
    assert message.startswith(f"{which.name}={value!r} is not a switch; expected 1 or 0 (")
    assert "\n" not in message


def test_the_wheelhouse_is_a_directory_or_a_path_not_yet_taken(tmp_path):
    assert wheelhouse.root({WHEELHOUSE.name: str(tmp_path)}) == tmp_path
    assert wheelhouse.root({WHEELHOUSE.name: str(tmp_path / "new" / "house")}) == tmp_path / "new" / "house"
    unset = {"XDG_CACHE_HOME": str(tmp_path / "c")}
    assert wheelhouse.root(unset) == wheelhouse.root({**unset, WHEELHOUSE.name: " "}) \
        == tmp_path / "c" / "torchpod" / "wheelhouse"


@pytest.mark.parametrize("name, bad", [("file", lambda p: p / "file"), ("control", lambda p: p / "a\nb"),
                                       ("escape", lambda p: p / "a\x1b[2Jb")])
def test_a_wheelhouse_that_cannot_be_one_is_refused_in_one_line(tmp_path, name, bad):
    (tmp_path / "file").write_text("not a folder")
    value = str(bad(tmp_path))
    with pytest.raises(InputError) as caught:
        wheelhouse.root({WHEELHOUSE.name: value})
    message = str(caught.value)
    assert message.startswith(f"{WHEELHOUSE.name}={value!r} is not a directory; expected the path of a directory")
    assert "\n" not in message and "\x1b" not in message


def test_a_task_checks_every_setting_it_reads_and_no_other(tmp_path):
    (tmp_path / "file").write_text("")
    settings.check({PRUNE_BUILD_CACHE.name: "1", WHEELHOUSE.name: str(tmp_path)}, "test")
    with pytest.raises(InputError, match=f"^{PRUNE_BUILD_CACHE.name}='yes'"):
        settings.check({PRUNE_BUILD_CACHE.name: "yes"}, "test")
    with pytest.raises(InputError, match=f"^{WHEELHOUSE.name}="):
        settings.check({WHEELHOUSE.name: str(tmp_path / "file")}, "image.build")
    settings.check({PRUNE_BUILD_CACHE.name: "yes"}, "image.build")  # build does not read it
    settings.check({WHEELHOUSE.name: str(tmp_path / "file")}, "image.push")


def test_help_sections_come_from_the_table():
    for which in SETTINGS:
        for task in which.commands:
            section = settings.help_section(task)
            flat = " ".join(section.split())
            assert section.startswith("Environment:") and f"\n  {which.name}\n" in section + "\n"
            assert " ".join(f"{which.meaning}. Expected: {which.form.expected}.".split()) in flat
            assert which.default is None or f"Default: {' '.join(which.default.split())}." in flat
    assert settings.help_section("image.push") == ""


def test_the_table_has_one_record_per_name_and_none_the_launcher_declares():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names)) and all(re.fullmatch(r"TORCHPOD_[A-Z_]*[A-Z]", n) for n in names)
    assert not set(names) & ({s.name for s in contract.SETTINGS} | set(contract.OUTPUTS))
    assert all(which.commands for which in SETTINGS), "a setting no task reads is read by nobody"


# --- every TORCHPOD_* name on the build host is in a table -------------------------------

TOOLKIT = ROOT / "toolkit" / "torchpod_toolkit"
# Where the build host reads its environment: the toolkit, the tasks, and the test helper that
# reads the CI switch.
SOURCES = sorted(p for p in TOOLKIT.rglob("*.py") if "__pycache__" not in p.parts) + \
    [ROOT / "tasks.py", ROOT / "tests" / "needs.py"]
NAME = re.compile(r"TORCHPOD_[A-Z_]*[A-Z]")
# Names these sources mention that no Python reads from the environment, and where each is
# documented instead. The batch scripts read TORCHPOD_SIF and TORCHPOD_SQSH, so their meaning
# belongs in each script's header and docs/manifests.md, not in --help.
NOT_SETTINGS = {
    "TORCHPOD_REBUILD": "a Docker build argument (docker/Dockerfile, commands.REBUILD_ARG)",
    "TORCHPOD_SIF": "read by the Apptainer batch scripts invoke manifests writes",
    "TORCHPOD_SQSH": "read by the enroot/pyxis batch scripts invoke manifests writes",
}
KNOWN = {s.name for s in SETTINGS} | {s.name for s in contract.SETTINGS} | set(contract.OUTPUTS)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_torchpod_name_on_the_build_host_is_in_a_table(path):
    unknown = set(NAME.findall(path.read_text(encoding="utf-8"))) - KNOWN - set(NOT_SETTINGS)
    assert not unknown, f"{path.relative_to(ROOT)} names {sorted(unknown)}: declare them in torchpod_toolkit.settings"


def test_the_names_that_are_no_settings_are_still_where_they_are_said_to_be():
    everything = "".join(p.read_text(encoding="utf-8") for p in SOURCES)
    assert all(name in everything for name in NOT_SETTINGS)
    assert not set(NOT_SETTINGS) & KNOWN
    assert "ARG TORCHPOD_REBUILD" in (ROOT / "docker" / "Dockerfile").read_text()


def env_reads(source: str) -> list[str]:
    """Each read of a TORCHPOD_* variable that bypasses the table's parser: its literal name
    in ``X.get(...)``, ``getenv(...)``, ``X[...]`` or ``... in X``, or a record's ``.name``
    (``WHEELHOUSE.name``, ``settings.WHEELHOUSE.name``) handed to one of those, as the source text."""
    found = []

    def bypasses(key: ast.AST | None) -> bool:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return NAME.fullmatch(key.value) is not None
        if not (isinstance(key, ast.Attribute) and key.attr == "name"):
            return False
        record = key.value.attr if isinstance(key.value, ast.Attribute) else getattr(key.value, "id", "")
        return re.fullmatch(r"[A-Z][A-Z0-9_]*", record) is not None  # a declared record, not a path's name

    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Call) and node.args and (
                isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "getenv", "pop")
                or isinstance(node.func, ast.Name) and node.func.id == "getenv"):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):  # a write sets, never reads
            key = node.slice
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            key = node.left
        if bypasses(key):
            found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_build_host_reads_its_settings_only_through_the_table(path):
    assert env_reads(path.read_text(encoding="utf-8")) == [], \
        "read a setting with torchpod.contract.setting/switch and its record in torchpod_toolkit.settings"


def test_the_read_finder_finds_each_way_around_the_parser():
    source = ("import os\nos.environ.get('TORCHPOD_A')\nos.getenv('TORCHPOD_B', '')\nenv['TORCHPOD_C']\n"
              "'TORCHPOD_D' in os.environ\nenv.get(WHEELHOUSE.name)\nsetting(env, WHEELHOUSE)\n"
              "os.environ[settings.REQUIRE_TOOLS.name]\npath.name in keep\n"
              "args['TORCHPOD_REBUILD'] = 'x'\nos.environ.get('HOME')\n")
    assert env_reads(source) == ["os.environ.get('TORCHPOD_A')", "os.getenv('TORCHPOD_B', '')", "env['TORCHPOD_C']",
                                 "'TORCHPOD_D' in os.environ", "env.get(WHEELHOUSE.name)",
                                 "os.environ[settings.REQUIRE_TOOLS.name]"]


def test_the_records_are_the_launchers():
    # one parser for both packages: the same value means the same thing in the image and here
    assert all(isinstance(which, contract.Setting) for which in SETTINGS)
    assert PRUNE_BUILD_CACHE.form is contract.SWITCH and REQUIRE_TOOLS.form is contract.SWITCH
    assert setting({REQUIRE_TOOLS.name: " 1 "}, REQUIRE_TOOLS) == "1"
