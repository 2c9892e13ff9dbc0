"""torchpod.contract: each shared fact written once, --help generated from the settings
table, every TORCHPOD_* name the launcher mentions in that table, the Dockerfile and the
example workloads in step with it, and its values held to the upstream facts they cite."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import torchpod.cli as cli
from torchpod import commands, contract
from torchpod.contract import SETTINGS
from torchpod.errors import InputError

from needs import module
from paths import ROOT

LAUNCHER = ROOT / "entrypoints" / "torchpod"
TOOLKIT = ROOT / "toolkit" / "torchpod_toolkit"
NAME = re.compile(r"TORCHPOD_[A-Z_]*[A-Z]")


def _sources(folder: Path, *patterns: str) -> list[Path]:
    return sorted(p for pattern in patterns for p in folder.rglob(pattern) if "__pycache__" not in p.parts)


def test_every_torchpod_name_in_the_launcher_is_in_the_table():
    known = {s.name for s in SETTINGS} | set(contract.OUTPUTS)
    for path in _sources(LAUNCHER, "*.py", "*.json"):
        unknown = set(NAME.findall(path.read_text())) - known
        assert not unknown, f"{path.relative_to(ROOT)} names {sorted(unknown)}: add them to contract.SETTINGS"


def test_help_lists_every_setting_with_its_meaning_and_default(capsys):
    assert cli.main(["--help"], {}) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    at = [out.index(f"  {s.name}\n") for s in SETTINGS]
    assert at == sorted(at), "--help lists the settings in the table's order"
    for s in SETTINGS:
        assert " ".join(s.meaning.split()) in flat, s.name
        if s.default is not None:
            assert f"(default: {s.default})" in flat, s.name


def test_help_names_the_two_settings_it_used_to_omit(capsys):
    cli.main(["--help"], {})
    out = capsys.readouterr().out
    assert "TORCHPOD_SITE_LIB" in out and "TORCHPOD_SYSFS_ROOT" in out


def test_the_table_has_one_record_per_name():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names)) and all(NAME.fullmatch(n) for n in names)
    assert not set(names) & set(contract.OUTPUTS)


# Reads of a setting by its literal name, e.g. env.get("TORCHPOD_X") or get(env, "TORCHPOD_X"):
# the launcher reads settings through the table (contract.ENV_*.name).
LITERAL_READ = re.compile(r"""(?:\.get\(|get\(env,\s*|env\[)\s*["']TORCHPOD_""")


# torchpod.shim's sitecustomize runs in every worker before anything is imported, so it names
# the one variable it reads itself: the contract's name, checked equal here.
SHIM = LAUNCHER / "shim" / "sitecustomize.py"


def test_the_launcher_reads_settings_through_the_table():
    readers = {str(p.relative_to(LAUNCHER)) for p in _sources(LAUNCHER, "*.py")
               if p != SHIM and LITERAL_READ.search(p.read_text())}
    assert readers == set(), "read TORCHPOD_* through contract.ENV_*.name"
    assert set(re.findall(r"TORCHPOD_[A-Z_]+", SHIM.read_text())) == {contract.ENV_STACKS_DIR}


# A setting read by its table name but around its parser, e.g. get(env, ENV_X.name) or
# env.get(ENV_X.name): every reader goes through contract.setting, switch or number.
RAW_READ = re.compile(r"(?:\bget\(\s*\w+,\s*|\.get\(\s*|\benv\[\s*)ENV_[A-Z_]+\.name")


def test_the_launcher_reads_settings_only_through_their_parser():
    readers = {str(p.relative_to(LAUNCHER)) for p in _sources(LAUNCHER, "*.py")
               if p.name != "contract.py" and RAW_READ.search(p.read_text())}
    assert readers == set(), "read a setting with contract.setting, switch or number"
    assert RAW_READ.search("found = get(env, ENV_RDZV_PORT.name)") and RAW_READ.search("env.get(ENV_PRESET.name)")


def test_messages_take_setting_names_from_the_table():
    # prose (docstrings, comments) may name a setting; a message builds it from contract.ENV_*.name
    found = {str(p.relative_to(LAUNCHER)): NAME.findall(_code_only(p)) for p in _sources(LAUNCHER, "*.py")
             if p.name != "contract.py"}
    assert {k: v for k, v in found.items() if set(v) - set(contract.OUTPUTS)} == {}


@pytest.mark.parametrize("name, value, needle", [
    ("TORCHPOD_SCHEDULER", "cobalt", "is not a known scheduler"),
    ("TORCHPOD_RDZV_PORT", "70000", "TORCHPOD_RDZV_PORT"),
    ("TORCHPOD_RDZV_TIMEOUT", "soon", "TORCHPOD_RDZV_TIMEOUT"),
    ("TORCHPOD_PRESET", "no-such-shape", "TORCHPOD_PRESET"),
    ("TORCHPOD_SCHEDULER", "slurm\n; rm -rf /", "TORCHPOD_SCHEDULER"),
])
def test_a_bad_setting_is_one_line_naming_it(name, value, needle, capsys, tmp_path):
    env = {name: value, "TORCHPOD_SYSFS_ROOT": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    if name in ("TORCHPOD_RDZV_PORT", "TORCHPOD_RDZV_TIMEOUT"):  # read only where an endpoint is built
        env.update({"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "0",
                    "SLURM_STEP_ID": "0", "TORCHPOD_HOSTNAME": "n1"})
    assert cli.main(["plan", "--", "train.py"], env) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and name in err[0], err


def test_every_setting_set_blank_reads_as_unset(capsys):
    # enroot's `--env NAME` hands an unset name over as NAME= (NVIDIA/enroot src/runtime.sh):
    # a job script that forwards every setting must plan exactly as one that forwards none
    job = {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "0", "SLURM_STEP_ID": "0",
           "CUDA_VISIBLE_DEVICES": "", "TORCHPOD_HOSTNAME": "n1"}
    plans = []
    for blank in ({}, {s.name: "" for s in SETTINGS if s.name != "TORCHPOD_HOSTNAME"}):
        assert cli.main(["plan", "--", "train.py"], {**job, **blank}) == 0, capsys.readouterr().err
        plans.append(capsys.readouterr().out)
    assert plans[0] == plans[1] and plans[0]


@settings(deadline=None, max_examples=200)
@given(st.text())
def test_setting_is_the_value_without_surrounding_blanks_or_one_line_naming_it(value):
    for s in SETTINGS:
        assert contract.setting({}, s) == ""
        try:
            got = contract.setting({s.name: value}, s)
        except InputError as exc:
            message = str(exc)
            assert value.strip() and not s.form.accepts(value.strip())
            assert message.startswith(f"{s.name}=") and f"expected {s.form.expected}" in message
            assert message.isprintable(), message  # the value is quoted: no control character leaks
            continue
        assert got == value.strip() and (not got or s.form.accepts(got))


@pytest.mark.parametrize("which, good, bad", [
    (contract.ENV_DOCTOR, ["0", "1", " 1 "], ["yes", "true", "on", "2", "\u0661", "1\n0"]),
    (contract.ENV_RDZV_PORT, ["1", "29400", "65535"], ["0", "65536", "http", "\u0662\u0669\u0664", "294\n00"]),
    (contract.ENV_RDZV_TIMEOUT, ["1", "900"], ["0", "soon", "-5", "1.5", "1e3"]),
    (contract.ENV_SCHEDULER, ["slurm", "auto", "Slurm"], ["slurm;id", "sl urm", "\x1b[2J", "\u0455lurm"]),
    (contract.ENV_HOSTNAME, ["gpu001", "n1.cluster", "fd00::2"], ["gpu 1", "n1\tn2", "$(id)"]),
    (contract.ENV_SITE_LIB, ["/site/lib:/site/deps", "/opt/é"], ["/site\n/lib", "/a\x00b", "/a\u2028b"]),
])
def test_each_form_accepts_its_grammar_and_refuses_the_rest(which, good, bad):
    for value in good:
        contract.setting({which.name: value}, which)
    for value in bad:
        with pytest.raises(InputError, match=f"^{which.name}=.* is not {which.form.what}; expected "):
            contract.setting({which.name: value}, which)


def test_a_switch_is_its_default_when_unset_and_a_number_is_an_int():
    assert contract.switch({}, contract.ENV_NET_PIN) is True and contract.switch({}, contract.ENV_DOCTOR) is False
    assert contract.switch({"TORCHPOD_NCCL_NET_PIN": " 0"}, contract.ENV_NET_PIN) is False
    assert contract.number({"TORCHPOD_RDZV_PORT": "+29401"}, contract.ENV_RDZV_PORT) == 29401
    assert contract.number({"TORCHPOD_RDZV_PORT": " "}, contract.ENV_RDZV_PORT) is None


def test_every_setting_is_read_by_a_known_command():
    for s in SETTINGS:
        assert s.commands and set(s.commands) <= set(contract.COMMANDS), s.name


@settings(deadline=None, max_examples=50)
@given(st.lists(st.text(min_size=1), min_size=1, max_size=4))
@example(["0" * 83])  # one word longer than the width: textwrap's default broke it in two
def test_environment_help_keeps_every_meaning_whole(meanings):
    table = [contract.Setting(f"TORCHPOD_X{i}", m) for i, m in enumerate(meanings)]
    text = commands.environment_help(table)
    flat = " ".join(text.split())
    for s in table:
        assert f" {s.name} " in f" {flat} " and " ".join(s.meaning.split()) in flat


# --- each literal once --------------------------------------------------------------
SHARED = [r"\b23456\b", r"\b29500\b", r"\b29400\b", r"\b2379\b", r"/opt/torchpod/", r"""["']/sys["']""",
          r"io\.torchpod\.", r"""["']TORCHPOD_RESULT """]


def _code_only(path: Path) -> str:
    """The file's code, its docstrings and comments left out: prose may name a value, the
    code must take it from the contract."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docs.add(id(body[0].value))
    parts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) and id(node) not in docs:
            parts.append(repr(node.value))
    return "\n".join(parts)


@pytest.mark.parametrize("path", [p for p in _sources(LAUNCHER, "*.py") + _sources(TOOLKIT, "*.py")
                                  + [ROOT / "tasks.py"] + sorted((ROOT / "bench").glob("*.py"))
                                  if p.name != "contract.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_shared_literal_outside_the_contract(path):
    code = _code_only(path)
    found = [pattern for pattern in SHARED if re.search(pattern, code)]
    assert found == [], \
        f"{path.relative_to(ROOT)} writes {found}: import it from torchpod.contract"


def test_the_contract_is_a_leaf_of_the_standard_library():
    tree = ast.parse((LAUNCHER / "contract.py").read_text())
    relative = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}
    # arch.py owns the architecture names (re-exported); errors.py the one family a refused value raises
    assert relative <= {"arch", "errors"}, relative
    for leaf, allowed in (("arch", {"errors"}), ("errors", set())):
        leaf_tree = ast.parse((LAUNCHER / f"{leaf}.py").read_text())
        assert {n.module for n in ast.walk(leaf_tree) if isinstance(n, ast.ImportFrom) and n.level} <= allowed, leaf
    assert contract.ARCHES is __import__("torchpod.arch").arch.ARCHES


def test_the_dockerfile_names_the_contracts_image_paths():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    for path in (contract.IMAGE_PLUGIN_DIR, contract.IMAGE_PLUGIN_LIBFABRIC):
        assert path in dockerfile, path
    # every /opt/torchpod path it writes is one the contract knows (or under one)
    known = (contract.IMAGE_PLUGIN_DIR, contract.SITE_LIB, contract.SITE_DEPS, contract.EXAMPLES_DIR)
    for used in set(re.findall(r"/opt/torchpod/[A-Za-z0-9_./-]*[A-Za-z0-9_]", dockerfile)):
        assert used.startswith(known), used
    assert "ARG EXAMPLES_DIR" in dockerfile  # filled from contract.EXAMPLES_DIR by commands.build_command
    assert "pip_selection" not in dockerfile  # a function that does not exist


def test_the_build_passes_the_contracts_examples_dir():
    from torchpod_toolkit.imagebuild import commands

    assert commands.EXAMPLES_DIR is contract.EXAMPLES_DIR


def test_the_result_prefix_is_what_the_workloads_print():
    tree = ast.parse((ROOT / "examples" / "common.py").read_text())
    values = [n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
              and any(getattr(t, "id", "") == "RESULT_PREFIX" for t in n.targets)]
    assert values == [contract.RESULT_PREFIX]
    assert contract.RESULT_PREFIX in (LAUNCHER / "bench_allreduce.py").read_text()


def test_labels_are_prefixed_and_distinct():
    assert contract.label("arch") == "io.torchpod.arch"
    assert len(set(contract.LABEL_KEYS)) == len(contract.LABEL_KEYS)


# --- the values against the upstream facts they cite ----------------------------------
def test_ports_are_the_upstream_defaults():
    assert contract.PYTORCHJOB_PORT == 23456  # training-operator PyTorchJobDefaultPort; Volcano DefaultPort
    assert contract.TRAINER_PORT == 29500  # kubeflow/trainer ContainerTrainerPort
    assert contract.ETCD_PORT == 2379  # etcd's IANA client port
    lo, hi = contract.EPHEMERAL_PORTS
    assert not lo <= contract.RDZV_PORT_DEFAULT <= hi


def test_torch_agrees_where_it_is_installed():
    torch_run = module("torch.distributed.run", "torch on the host (./setup.sh --tests installs the image's)")
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as c10d

    assert c10d.DEFAULT_PORT == contract.RDZV_PORT_DEFAULT
    # torch 2.13 leaves --master-port's parser default None and run() fills the port in
    # (torch/distributed/run.py, run: `if args.master_port is None: args.master_port = 29500`);
    # torch 2.11, on the GPU machine of bench/results/gpu-check-nvidia-h100-80gb-hbm3, has it
    # as the parser's default. Either way the port torchrun uses must be torchpod's.
    parsed = torch_run.get_args_parser().parse_args(["train.py"])
    source = Path(torch_run.__file__).read_text()
    if parsed.master_port is None:
        assert f"args.master_port = {contract.TORCHRUN_MASTER_PORT}" in source
    else:
        assert parsed.master_port == contract.TORCHRUN_MASTER_PORT
