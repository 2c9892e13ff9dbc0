"""The TORCHPOD_* variables the build host reads: the toolkit, its invoke tasks and the test
suite those tasks run. Each is declared once, with what it does, its default, the form its
value takes and the tasks that read it.

The records are the launcher's own (:class:`torchpod.contract.Setting`, read through
:func:`torchpod.contract.setting` and :func:`~torchpod.contract.switch`), so a switch set to
``yes`` is refused here in the same one line as in the image: the variable, the value, the
form expected. The launcher's variables stay in ``torchpod.contract.SETTINGS``; this table
holds only what no image reads. ``invoke --help TASK`` lists the settings of TASK from this
table, and every task checks them before it starts.

Names that look like settings but are none: ``TORCHPOD_REBUILD`` is a Docker build argument
(docker/Dockerfile; :func:`.commands.build_command` sets it), and ``TORCHPOD_SIF`` and
``TORCHPOD_SQSH`` are read by the batch scripts ``invoke manifests`` writes, never by Python:
each script's header and docs/manifests.md say what they do.

Nothing here reads the environment: callers pass it. The wheelhouse's form looks at the path
it is given (a directory, or nothing yet), so a file there is refused before a build starts.
"""

from __future__ import annotations

import os
import textwrap
from typing import Mapping

from torchpod.contract import SWITCH, Form, Setting, setting

__all__ = ["WHEELHOUSE", "PRUNE_BUILD_CACHE", "REQUIRE_TOOLS", "DEV_MOUNT", "DEV_PYTHONPATH", "SETTINGS",
           "DIRECTORY", "read_by", "check", "help_section"]


def _directory_or_none(text: str) -> bool:
    """A path without control characters where a directory is, or nothing is yet (the first
    use makes it); never a file, a socket or a device."""
    return all(ch.isprintable() for ch in text) and (os.path.isdir(text) or not os.path.lexists(text))


DIRECTORY = Form("a directory", "the path of a directory, or of nothing yet (made on first use), never of a file",
                 _directory_or_none)

# The tasks that fill or stage the wheelhouse: every image build (the CI images' of `test`
# and the image benches' included) and `wheels`.
_BUILDING = ("image.build", "image.wheels", "test", "bench.images", "bench.rebuild")

WHEELHOUSE = Setting("TORCHPOD_WHEELHOUSE", "where the content-addressed wheelhouse keeps every locked file, "
                     "shared by every checkout", "$XDG_CACHE_HOME/torchpod/wheelhouse, else "
                     "~/.cache/torchpod/wheelhouse", form=DIRECTORY, commands=_BUILDING)
PRUNE_BUILD_CACHE = Setting("TORCHPOD_PRUNE_BUILD_CACHE", "1: free BuildKit's cache after each payload group and "
                            "arch of the CI images' builds (CI sets it: a build machine short of disk)", "0",
                            form=SWITCH, commands=("test",))
REQUIRE_TOOLS = Setting("TORCHPOD_REQUIRE_TOOLS", "1: a test whose tool, privilege or host file is missing fails "
                        "instead of skipping (CI sets it: nothing skips where coverage is promised)", "0",
                        form=SWITCH, commands=("test",))

DEV_MOUNT = Setting("TORCHPOD_DEV_MOUNT", "1: the cluster tier bind-mounts this checkout's launcher and examples "
                    "over the image's copies (development only: no rebuild after an edit)", "0",
                    form=SWITCH, commands=("test",))
DEV_PYTHONPATH = Setting("TORCHPOD_DEV_PYTHONPATH", "a host directory the cluster tier mounts read-only at "
                         "/opt/dev-site and puts on the containers' PYTHONPATH (development only)", None,
                         form=DIRECTORY, commands=("test",))

# Every variable the build host reads, in the order --help lists them.
SETTINGS: tuple[Setting, ...] = (WHEELHOUSE, PRUNE_BUILD_CACHE, REQUIRE_TOOLS, DEV_MOUNT, DEV_PYTHONPATH)


def read_by(task: str) -> tuple[Setting, ...]:
    """The settings ``task`` (its dotted name, e.g. ``image.build``) reads, in table order."""
    return tuple(s for s in SETTINGS if task in s.commands)


def check(env: Mapping[str, str], task: str) -> None:
    """Every setting ``task`` reads, checked against its form before the task starts: a bad
    value is one line naming the setting, the value and the form, whichever step reads it first."""
    for which in read_by(task):
        setting(env, which)


def help_section(task: str, width: int = 76) -> str:
    """The "Environment" section of ``invoke --help TASK``; "" when the task reads none."""
    chosen = read_by(task)
    if not chosen:
        return ""
    lines = ["Environment:"]
    for which in chosen:
        default = f" Default: {which.default}." if which.default is not None else ""
        lines.append(f"  {which.name}")
        lines += textwrap.wrap(f"{which.meaning}. Expected: {which.form.expected}.{default}", width=width,
                               initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)
