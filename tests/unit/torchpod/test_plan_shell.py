"""`torchpod plan --format shell` is safe to eval: only comments and assignments, whatever
the environment holds, and every value round-trips exactly.

bash itself is the judge: the plan is eval'd in a clean bash, which must run no command
(a marker file never appears), export exactly the JSON plan's ``env`` and leave
TORCHPOD_COMMAND holding the JSON plan's command, word for word."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

import torchpod.cli as cli
from torchpod.plan import comment_text, to_shell
from torchpod.resolve import resolve
from torchpod.schedulers.common import Facts
from torchpod.torchrun_flags import split_command_line

from fabric_cases import FIXTURES as FABRICS
from fabric_cases import write_node

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")

_ROOT = Path(tempfile.mkdtemp(prefix="torchpod-shell-"))
# sysfs trees the plan reads: nothing, InfiniBand (NCCL_IB_GID_INDEX notes), RoCE (an
# added NCCL_IB_GID_INDEX), EFA with a site plugin (LD_LIBRARY_PATH carrying the user's value)
SYSFS = {"none": _ROOT / "empty" / "sys"}
SYSFS["none"].mkdir(parents=True)
for _name in ("infiniband_hdr_node", "roce_bonded_mlx5_ipv4_and_ipv6_both_versions", "aws_efa_node"):
    SYSFS[_name] = write_node(_ROOT / _name, FABRICS[_name])[0]
SITE_LIB = _ROOT / "site"
SITE_LIB.mkdir()
(SITE_LIB / "libnccl-net.so").write_text("")
# The helper tools gather_facts looks for on PATH: scontrol as it answers without a
# slurm.conf (exit 1), no nvidia-smi, whatever this machine has installed.
_TOOLS = Path(tempfile.mkdtemp(prefix="torchpod-tools-"))
(_TOOLS / "scontrol").write_text("#!/bin/sh\nexit 1\n")
(_TOOLS / "scontrol").chmod(0o755)

# the variables the schedulers and the fabric read, and torchrun's PET_* options
NAMES = [
    "SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODEID", "SLURM_STEP_ID", "SLURM_GPUS_PER_NODE",
    "VC_TASK_INDEX", "VC_WORKER_HOSTS", "VC_WORKER_NUM", "RUNAI_JOB_NAME", "WORLD_SIZE", "RANK",
    "MASTER_ADDR", "MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_RDZV_ENDPOINT", "PET_RDZV_ID",
    "PET_RDZV_CONF", "PET_MASTER_ADDR", "PET_LOCAL_ADDR", "POD_NAME", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK", "PMIX_NAMESPACE", "NCCL_IB_GID_INDEX", "NCCL_IB_HCA", "NCCL_NET_PLUGIN",
    "LD_LIBRARY_PATH", "FI_PROVIDER", "TORCHPOD_SCHEDULER", "TORCHPOD_PRESET",
]
HOSTILE = [
    "$(touch MARKER)", "`touch MARKER`", "x\ntouch MARKER\n#", "';touch MARKER;'", "\"$(touch MARKER)\"",
    "a\rb", "a\x85b", "a\u2028b\u2029", "\\", "'", "\\'", "${PATH}", "\x1b[2J", "é", "²", "٣", "\x00",
    "\udcff", "x:1", "[::1]:1234", "join_timeout=1,x=$(touch MARKER)", "2", "0", "1:4", "n[1-2]",
]
VALUE = st.one_of(st.sampled_from(HOSTILE), st.text(st.characters(codec=None), max_size=12),
                  st.builds(lambda a, b: a + b, st.sampled_from(HOSTILE), st.text(max_size=4)))
# shapes of job that reach the parts of the plan a value can flow into (notes, rdzv id and
# conf, endpoint, the torchrun command, the exported fabric variables)
BASES = [
    {},
    {"MASTER_ADDR": "10.0.0.1", "WORLD_SIZE": "2", "RANK": "1"},
    {"PET_NNODES": "2", "PET_RDZV_ENDPOINT": "job-worker-0:29400", "PET_NODE_RANK": "1"},
    {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "0", "SLURM_STEP_ID": "0"},
]


def main(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch.dict(os.environ, {"PATH": str(_TOOLS)}):
        code = cli.main(argv, env)
    return code, out.getvalue(), err.getvalue()


def eval_in_bash(plan: str, cwd: Path) -> tuple[dict[str, str], list[str]]:
    """bash evals the plan in ``cwd``; its exported environment, and TORCHPOD_COMMAND's words
    as bash itself splits them."""
    (cwd / "plan.sh").write_text(plan, encoding="utf-8")
    script = ('eval "$(cat plan.sh)"; env -0 > env.out; '
              'eval "set -- $TORCHPOD_COMMAND"; printf "%s\\0" "$@" > words.out')
    done = subprocess.run([BASH, "--norc", "--noprofile", "-c", script], cwd=cwd, env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    exported = dict(item.split("=", 1) for item in (cwd / "env.out").read_bytes().decode().split("\0") if item)
    words = (cwd / "words.out").read_bytes().decode().split("\0")[:-1]
    return exported, words


def _baseline() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        return eval_in_bash("TORCHPOD_COMMAND=x\n", Path(tmp))[0]


BASELINE = _baseline()


def assert_only_assignments(out: str) -> None:
    """The plan read as the shell reads it: comments, then `export NAME=value` words and
    one TORCHPOD_COMMAND=value; a comment is one printable ASCII line."""
    lex = shlex.shlex(out, posix=True)
    lex.whitespace_split, lex.commenters = True, "#"
    tokens = list(lex)
    assert tokens[-1].startswith("TORCHPOD_COMMAND=") and tokens.count("export") * 2 + 1 == len(tokens), tokens
    for word, assignment in zip(tokens[0:-1:2], tokens[1:-1:2]):
        assert word == "export" and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", assignment, re.S), tokens
    lines = out.rstrip("\n").split("\n")
    first = next(i for i, ln in enumerate(lines) if ln.startswith(("export ", "TORCHPOD_COMMAND=")))
    comments = lines[:first] + lines[-1:]  # the notes on top, the recipe last
    assert all(ln.startswith("# ") and ln.isascii() and ln.isprintable() for ln in comments), comments


def check_plan_evals_to_its_json(env: dict[str, str], argv: list[str]) -> None:
    code, out, err = main(["plan", "--format", "shell", *argv], env)
    if currently_in_test_context():
        event("refused in one line" if code else "eval'd")
    if code != 0:
        assert code == 2 and out == "", (code, out)
        (line,) = err.strip().splitlines()
        assert line.startswith("torchpod: error: ")
        return
    assert_only_assignments(out)
    jcode, jout, _ = main(["plan", *argv], env)
    assert jcode == 0
    data = json.loads(jout)
    with tempfile.TemporaryDirectory() as tmp:
        exported, words = eval_in_bash(out, Path(tmp))
        assert not (Path(tmp) / "MARKER").exists(), "eval ran a command"
    added = {k: v for k, v in exported.items() if k not in BASELINE or BASELINE[k] != v}
    for name in ("_", "PWD"):  # bash's last argument, and the temp dir it ran in
        added.pop(name, None)
    assert added == data["env"]
    expected = data["command"] or [sys.executable, "-m", "torchpod.torchrun", *data["torchrun_args"]]
    assert words == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(BASES),
    extra=st.dictionaries(st.sampled_from(NAMES), VALUE, max_size=4),
    fabric=st.sampled_from(sorted(SYSFS)),
    script_args=st.lists(VALUE, max_size=3),
)
@example(base=BASES[1], extra={"WORLD_SIZE": "2\ntouch MARKER\n#"}, fabric="none", script_args=[])
@example(base=BASES[2], extra={"PET_RDZV_ID": "x\ntouch MARKER", "PET_RDZV_CONF": "a=$(touch MARKER)"},
         fabric="none", script_args=["'$(touch MARKER)'"])
@example(base={}, extra={"NCCL_IB_GID_INDEX": "1\ntouch MARKER\n"}, fabric="infiniband_hdr_node", script_args=[])
@example(base={}, extra={"LD_LIBRARY_PATH": "/x'\n$(touch MARKER)"}, fabric="aws_efa_node", script_args=[])
def test_eval_of_the_shell_plan_runs_nothing_and_sets_exactly_the_plan(base, extra, fabric, script_args):
    env = {**base, **extra, "TORCHPOD_HOSTNAME": "n1", "TORCHPOD_SYSFS_ROOT": str(SYSFS[fabric]),
           "CUDA_VISIBLE_DEVICES": ""}
    if fabric == "aws_efa_node":
        env["TORCHPOD_SITE_LIB"] = str(SITE_LIB)
    argv = ["--", "train.py", *script_args] if script_args else []
    check_plan_evals_to_its_json(env, argv)


def test_a_newline_in_a_note_stays_in_its_comment(tmp_path):
    # a control character in a torchrun option is refused before it can reach a note...
    env = {"MASTER_ADDR": "10.0.0.1", "WORLD_SIZE": "2", "RANK": "0", "NPROC_PER_NODE": "2",
           "PET_RDZV_ID": "job\ntouch MARKER\n#", "TORCHPOD_HOSTNAME": "n1",
           "TORCHPOD_SYSFS_ROOT": str(SYSFS["none"])}
    code, out, err = main(["plan", "--format", "shell"], env)
    assert code == 2 and out == "" and err.startswith("torchpod: error: PET_RDZV_ID='job\\ntouch MARKER")
    # ...and a note that holds one anyway stays inside its comment, escaped
    del env["PET_RDZV_ID"]
    plan = resolve(env, Facts(hostname="n1", sysfs_root=SYSFS["none"]), split_command_line([]))
    text = to_shell(replace(plan, notes=("job\ntouch MARKER\n#",)), sys.executable)
    assert "# job\\ntouch MARKER\\n#" in text.splitlines()
    eval_in_bash(text, tmp_path)
    assert not (tmp_path / "MARKER").exists()


def test_roce_gid_index_is_exported_and_the_command_round_trips():
    env = {"TORCHPOD_HOSTNAME": "n1", "TORCHPOD_SYSFS_ROOT": str(SYSFS["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])}
    code, out, _ = main(["plan", "--format", "shell", "--", "train.py", "it's", "a\nb"], env)
    assert code == 0 and "export NCCL_IB_GID_INDEX=" in out
    check_plan_evals_to_its_json(env, ["--", "train.py", "it's", "a\nb"])


def test_without_a_script_the_comment_says_how_to_pass_it(tmp_path):
    code, out, _ = main(["plan", "--format", "shell"], {"TORCHPOD_SYSFS_ROOT": str(SYSFS["none"])})
    assert code == 0
    (line,) = [ln for ln in out.splitlines() if ln.startswith("TORCHPOD_COMMAND=")]
    words = shlex.split(shlex.split(line.partition("=")[2])[0])
    (tmp_path / "args.py").write_text("import sys, json; print(json.dumps(sys.argv[1:]))")
    # the comment's recipe, with python standing in for torchrun: "$@" reaches the end
    recipe = out.strip().splitlines()[-1].partition(": ")[2]
    assert recipe == 'eval "exec $TORCHPOD_COMMAND \\"\\$@\\""'
    stub = shlex.join([sys.executable, str(tmp_path / "args.py")])
    done = subprocess.run([BASH, "-c", f"TORCHPOD_COMMAND={shlex.quote(stub)}; {recipe}", "_", "s.py", "a b"],
                          capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout) == ["s.py", "a b"]
    assert words[1:3] == ["-m", "torchpod.torchrun"]


@pytest.mark.parametrize("value", ["a\x00b", "\udcff"])
def test_a_value_no_shell_can_carry_is_one_line(value):
    code, out, err = main(["plan", "--format", "shell", "--", "train.py", value],
                          {"TORCHPOD_SYSFS_ROOT": str(SYSFS["none"])})
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("torchpod: error: torchrun argument=") and "cannot carry" in line
    # JSON carries it (escaped)
    code, out, _ = main(["plan", "--", "train.py", value], {"TORCHPOD_SYSFS_ROOT": str(SYSFS["none"])})
    assert code == 0 and json.loads(out)["script_args"] == [value]


@pytest.mark.parametrize(
    "text, shown",
    [("a\nb", "a\\nb"), ("a\rb", "a\\rb"), ("\x85", "\\x85"), ("\u2028\u2029", "\\u2028\\u2029"),
     ("\\n", "\\\\n"), ("é😀", "\\xe9\\U0001f600"), ("\x00\x7f", "\\x00\\x7f"), ("ok $(x) 'q'", "ok $(x) 'q'")],
)
def test_comment_text_escapes_everything_outside_printable_ascii(text, shown):
    assert comment_text(text) == shown


@given(st.text(st.characters(codec=None)))
@settings(max_examples=200, deadline=None)
def test_comment_text_is_one_printable_ascii_line(text):
    shown = comment_text(text)
    assert shown.isascii() and shown.isprintable()
    # unambiguous: decoding the escapes gives the text back
    assert shown.encode().decode("unicode_escape") == text
