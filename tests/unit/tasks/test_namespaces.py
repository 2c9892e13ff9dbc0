"""tasks.py in namespaces, read through invoke's Collection API: every
bench program (bench/<name>.py, the name not starting with ``_``) has a ``bench.*`` task and
no helper (bench/_<name>.py) has one, every helper is imported by a program, every command
name from before the namespaces resolves to the same task with the same flags, short flags
are declared (never ``-`` and never a letter that moved), and the words a bench or ``test``
task passes on are quoted."""

from __future__ import annotations

import ast
import copy
import importlib.util
import re
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from invoke import Exit

from paths import ROOT, bench_helpers, bench_programs


def _load(name="tasks_namespaces_under_test"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TASKS = _load()
NS = TASKS.ns

# Today's command names (README, docs/, .ci/run, users' scripts) -> the namespaced task; `lock` is
# `invoke lock` under its own name.
OLD_NAMES = {"build": "image.build", "push": "image.push", "wheels": "image.wheels", "lock": "image.lock",
             "manifests": "jobs.manifests", "demo": "cluster.demo", "bench-rendezvous": "bench.rendezvous",
             "test": "test", "measurements": "measurements"}

# The short flags invoke had given these tasks before they were declared: a user's script may
# use any of them, so none may change (--site-lib had `-`, shown as `--=STRING`: gone).
SHORT = {
    "build": {"arch": "a", "ca_bundle": "c", "netplugin_version": "e", "image": "i", "netplugin_tarball": "n",
              "offline": "o", "netplugin_sha256": "t"},
    "push": {"image": "i", "insecure": "n", "registry": "r", "arch": "a"},  # -a: build's letter for the arch
    "wheels": {"arch": "a", "image": "i", "offline": "o"},
    "lock": {"arch": "a", "check": "k", "image": "i", "wheels_only": "w"},
    "test": {"build_images": "b", "pytest_args": "p", "tier": "t"},
    "demo": {"gpus": "g", "manifest": "m", "nodes": "n", "scheduler": "s", "timeout": "t", "workload": "w"},
    # chosen, not inherited: what a user would guess; nothing that rewrites files or opens the host
    # (-q and -w for --queue and --walltime are gone: sbatch reads -q as the QOS, -w as the node list)
    "manifests": {"scheduler": "s", "nodes": "n", "image": "i", "gpus_per_node": "g", "out": "o", "env": "e",
                  "volume": "v"},
    "bench-rendezvous": {"nodes": "n", "repeats": "r"},
    "measurements": {"check": "c"},
}


def _arguments(name: str) -> dict:
    # get_arguments consumes the task's help dict (invoke/tasks.py, Task.arg_opts): a copy
    task = copy.deepcopy(NS[name])
    return {a.attr_name or a.name: a for a in task.get_arguments()}


def _shorts(name: str) -> dict[str, str]:
    return {attr: n for attr, a in _arguments(name).items() for n in a.names if len(n) == 1}


def test_the_issue_names_are_the_tasks():
    names = set(NS.task_names)
    assert {"image.build", "image.push", "image.wheels", "jobs.manifests", "cluster.demo", "test",
            "measurements"} <= names
    # nothing at the top but the two namespaced tasks and the old names
    assert {n for n in names if "." not in n} == set(OLD_NAMES)


def test_every_bench_program_has_a_bench_task_and_no_other():
    programs = {p.stem.replace("_", "-"): p for p in bench_programs()}
    benches = {n.split(".", 1)[1] for n in NS.task_names if n.startswith("bench.")}
    assert benches == set(programs) and len(programs) >= 7
    for name, script in programs.items():
        doc = NS[f"bench.{name}"].__doc__
        assert f"python bench/{script.name}" in doc and f"invoke bench.{name} -- --help" in doc


def test_no_bench_helper_has_a_task():
    helpers = bench_helpers()
    assert helpers, "bench/ has helpers today (_layer_figures, _gpu_*): a rule that nothing exercises proves nothing"
    names = set(NS.task_names) | {a for aliases in NS.task_names.values() for a in aliases}
    # compared with every underscore a dash: invoke would list _layer_figures as bench._layer-figures
    dashed = {n.replace("_", "-") for n in names}
    for helper in helpers:
        assert f"bench.{helper.stem}".replace("_", "-") not in dashed, helper.name


def test_every_bench_task_runs_a_program_and_none_runs_a_helper(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["invoke"])
    ran = []
    for name in sorted(n for n in NS.task_names if n.startswith("bench.")):
        c = _Recorder()
        NS[name].body(c)
        [command] = c.commands
        ran.append(Path(shlex.split(command)[1]))
    assert sorted(ran) == bench_programs() and not set(ran) & set(bench_helpers())


def test_a_new_bench_script_gets_a_task(tmp_path, monkeypatch):
    (tmp_path / "rendezvous.py").write_text('"""Rendezvous benchmark: seconds."""\n')
    (tmp_path / "disk_io.py").write_text('"""Disk benchmark: reads per second. More text."""\n')
    (tmp_path / "bare.py").write_text("x = 1\n")
    # helpers get none, whatever their docstring says or however their name is formed
    (tmp_path / "_disk_figures.py").write_text('"""Disk figures: medians. Run me."""\n')
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "_.py").write_text("")
    (tmp_path / "notes.txt").write_text("")
    monkeypatch.setattr(TASKS, "BENCH", tmp_path)
    monkeypatch.setattr(TASKS, "ROOT", tmp_path.parent)
    ns = TASKS._namespace()
    assert {n for n in ns.task_names if n.startswith("bench.")} == {"bench.disk-io", "bench.bare",
                                                                    "bench.rendezvous"}
    assert ns["bench.disk-io"].__doc__.splitlines()[0] == "Disk benchmark."
    assert ns["bench.bare"].__doc__.splitlines()[0] == f"{tmp_path.name}/bare.py."


def _imported(path: Path) -> set[str]:
    """The top-level module names ``path`` imports (``import x``, ``import x as y``, ``from x
    import y``), wherever in the file; a relative import names none."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".", 1)[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".", 1)[0])
    return found


def unreached_helpers(programs: list[Path], helpers: list[Path]) -> list[str]:
    """The helpers no program imports, directly or through a helper a program imports: dead
    code that no task runs and no run reaches."""
    known = {h.stem: h for h in helpers}
    reached: set[str] = set()
    todo = [name for p in programs for name in _imported(p) if name in known]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += [n for n in _imported(known[name]) if n in known]
    return sorted(f"{name}.py" for name in set(known) - reached)


def test_every_bench_helper_is_imported_by_a_program():
    assert unreached_helpers(bench_programs(), bench_helpers()) == [], \
        "a bench helper no program imports is dead: import it from the program that needs it, or remove it"


def test_a_helper_no_program_reaches_is_found(tmp_path):
    files = {
        "layers.py": "import _figures as figures\n",
        "gpu.py": "import sys\nif True:\n    from _steps import run\n",  # imported anywhere in the file
        "_figures.py": "import json\n",
        "_steps.py": "from _judges import judge\n",  # reached through a helper the program imports
        "_judges.py": "import re\n",
        "_dead.py": "import _dead_too\n",  # only a dead helper imports it
        "_dead_too.py": "import _dead\n",
        "_named.py": "x = 1\n",  # named in a program's text, never imported by name
        "loop.py": '"""_named"""\nfrom . import _named\n',  # a relative import reaches no helper of bench/
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    programs = sorted(p for p in tmp_path.glob("*.py") if not p.name.startswith("_"))
    helpers = sorted(p for p in tmp_path.glob("*.py") if p.name.startswith("_"))
    assert unreached_helpers(programs, helpers) == ["_dead.py", "_dead_too.py", "_named.py"]


@pytest.mark.parametrize("old, new", OLD_NAMES.items())
def test_every_old_name_is_its_namespaced_task(old, new):
    assert NS[old].body is NS[new].body
    before, after = _arguments(old), _arguments(new)
    assert list(before) == list(after)
    for name, arg in before.items():
        other = after[name]
        assert (arg.names, arg.kind, arg.default, arg.help) == (other.names, other.kind, other.default, other.help)
    if old != new:
        assert NS[old].__doc__.startswith(f"Same as {new} ")


@pytest.mark.parametrize("name", SHORT)
def test_short_flags_are_the_ones_users_had(name):
    assert _shorts(name) == SHORT[name]


# Options that rewrite or overwrite files, or open the host to a container: typed out in full.
NO_SHORT = {"refresh", "force", "privileged"}


@pytest.mark.parametrize("name", ["manifests", "jobs.manifests"])
def test_no_option_that_rewrites_files_or_opens_the_host_has_a_letter(name):
    shorts = _shorts(name)
    assert not NO_SHORT & set(shorts), shorts


@pytest.mark.parametrize("name", ["manifests", "jobs.manifests"])
def test_every_default_is_in_the_help(name):
    from torchpod_toolkit.manifests.spec import cli_options

    for attr, arg in _arguments(name).items():
        default = dict((n, d) for n, d, _ in cli_options()).get(attr)
        if default not in (None, "", False, ()):
            assert f"default: {default}" in arg.help or "default" in arg.help, (attr, arg.help)


@pytest.mark.parametrize("name", sorted(NS.task_names))
def test_every_flag_is_its_name_or_one_declared_letter(name):
    letters = []
    for attr, arg in _arguments(name).items():
        long, *short = arg.names
        assert long == attr.replace("_", "-") and "-" not in short
        assert all(len(s) == 1 and s.isalpha() for s in short) and len(short) <= 1
        letters += short
    assert len(letters) == len(set(letters))


def test_manifests_site_lib_has_no_short_flag():
    assert _arguments("manifests")["site_lib"].names == ("site-lib",)


def _body(c, x=1, y=""):
    pass


@pytest.mark.parametrize("short", [{"z": "z"}, {"x": "q", "y": "q"}, {"x": "-"}, {"x": "xy"}])
def test_a_short_flag_that_names_no_option_or_repeats_fails_at_load(short):
    with pytest.raises(ValueError, match=r"task _body: short flags .* must name its options \(x, y\)"):
        TASKS._Task(_body, short=short)


class _Recorder:
    """The part of invoke's Context a task uses here: run() and the remainder."""

    def __init__(self, remainder="", exits=None):
        self.remainder = remainder
        self.commands: list[str] = []
        self.exits = exits or {}  # a command's first words that fail -> pytest's exit code

    def run(self, command, **kwargs):
        self.commands.append(command)
        code = next((code for start, code in self.exits.items() if start in command), 0)
        return SimpleNamespace(exited=code, ok=code == 0)


WORDS = st.lists(st.text(max_size=12), max_size=5)  # all of Unicode, control characters too


@settings(deadline=None, max_examples=60)
@given(words=WORDS, nodes=st.sampled_from(["", "2,4"]), repeats=st.sampled_from([0, 3]))
def test_a_bench_task_runs_its_script_with_every_word_after_dashes_quoted(words, nodes, repeats):
    c = _Recorder()
    saved = sys.argv
    sys.argv = ["invoke", "bench-rendezvous", "--", *words]
    try:
        NS["bench.rendezvous"].body(c, nodes=nodes, repeats=repeats)
    finally:
        sys.argv = saved
    flags = [*(["--nodes", nodes] if nodes else []), *(["--repeats", str(repeats)] if repeats else [])]
    assert [shlex.split(cmd) for cmd in c.commands] == [[sys.executable, str(ROOT / "bench" / "rendezvous.py"),
                                                         *flags, *words]]


@settings(deadline=None, max_examples=40)
@given(words=WORDS)
def test_without_dashes_in_argv_the_remainder_is_split_as_a_shell_would(words):
    c = _Recorder(remainder=shlex.join(words))
    saved = sys.argv
    sys.argv = ["invoke"]
    try:
        NS["bench.hostile-reads"].body(c)
    finally:
        sys.argv = saved
    assert shlex.split(c.commands[0]) == [sys.executable, str(ROOT / "bench" / "hostile_reads.py"), *words]


def test_an_unclosed_quote_in_the_remainder_is_one_line(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["invoke"])
    c = _Recorder(remainder="--sizes 'x")
    with pytest.raises(Exit) as caught:
        NS["bench.images"].body(c)
    assert caught.value.code == 2 and not c.commands
    assert str(caught.value.message).startswith("torchpod: bench/images.py's flags: No closing quotation")


@settings(deadline=None, max_examples=40)
@given(words=WORDS)
def test_pytest_args_reach_pytest_word_for_word(words):
    c = _Recorder()
    NS["test"].body(c, tier="unit", build_images=False, pytest_args=shlex.join(words), setup=False)
    [command] = [shlex.split(cmd) for cmd in c.commands]
    assert command[:4] == [sys.executable, "-m", "pytest", "tests/unit"]
    assert command[4:] == [*TASKS.tier_command("unit", [], TASKS.TIER_RUNS["unit"][0][1])[4:], *words]  # theirs last


@pytest.mark.parametrize("args", ["-k 'x", '"', "a\\"])
def test_unsplittable_pytest_args_are_one_line_before_anything_runs(args):
    c = _Recorder()
    with pytest.raises(Exit) as caught:
        NS["test"].body(c, tier="all", build_images=True, pytest_args=args)
    assert caught.value.code == 2 and not c.commands
    assert str(caught.value.message).startswith(f"torchpod: --pytest-args={args!r}: ")
    assert "\n" not in str(caught.value.message)


def _tiers_run(c) -> list[str]:
    return [shlex.split(cmd)[3] for cmd in c.commands if " -m pytest " in cmd]


def test_each_tier_is_its_own_run_in_order_after_the_test_tools_and_each_names_its_slowest(monkeypatch, capsys):
    built = []
    monkeypatch.setattr(TASKS, "_build_ci_images", lambda c, prune: built.append(len(c.commands)))
    c = _Recorder()
    NS["test"].body(c, tier="all", build_images=True, pytest_args="")
    assert shlex.split(c.commands[0]) == [str(ROOT / "setup.sh"), "--tests"]
    assert _tiers_run(c) == ["tests/unit", "tests/integration", "tests/image", "tests/cluster", "tests/cluster"]
    assert built == [3]  # once, after the unit and integration tiers, before the image tier
    assert all("--durations=30" in shlex.split(cmd) for cmd in c.commands[1:])
    out = capsys.readouterr().out
    cluster = [shlex.split(cmd) for cmd in c.commands if "tests/cluster" in cmd]
    assert cluster[0][-2:] == ["-m", "not solo"] and cluster[1][-2:] == ["-m", "solo"]  # the timed ones alone
    assert "-n" in cluster[0] and "-n" not in cluster[1]
    for name in ("setup.sh --tests", "tier unit", "build CI images", "tier cluster (side by side)",
                 "tier cluster (solo)", "total"):
        assert re.search(rf"^{re.escape(name)} +\d+\.\d$", out, flags=re.MULTILINE), name


def test_a_failed_unit_tier_stops_before_any_image_is_built(monkeypatch):
    monkeypatch.setattr(TASKS, "_build_ci_images", lambda c, prune: pytest.fail("built images after a unit failure"))
    c = _Recorder(exits={"tests/unit": 1})
    with pytest.raises(Exit) as caught:
        NS["test"].body(c, tier="all", build_images=True, pytest_args="", setup=False)
    assert _tiers_run(c) == ["tests/unit"]
    assert caught.value.code == 1 and "unit (pytest exit 1)" in str(caught.value.message)


def test_a_later_tiers_failure_lets_the_others_run_and_fails_the_task_naming_it(monkeypatch):
    monkeypatch.setattr(TASKS, "_build_ci_images", lambda c, prune: None)
    c = _Recorder(exits={"tests/integration": 1, "tests/cluster": 5})
    with pytest.raises(Exit) as caught:
        NS["test"].body(c, tier="all", build_images=True, pytest_args="", setup=False)
    assert _tiers_run(c) == ["tests/unit", "tests/integration", "tests/image", "tests/cluster", "tests/cluster"]
    # both runs of the cluster tier selected nothing: a failure, not a pass
    assert "integration (pytest exit 1), cluster (pytest exit 5)" in str(caught.value.message)


def test_one_run_of_a_split_tier_selecting_nothing_is_no_failure(monkeypatch):
    class OnlySolo(_Recorder):
        def run(self, command, **kwargs):
            result = super().run(command, **kwargs)
            return SimpleNamespace(exited=5, ok=False) if "not solo" in command else result

    c = OnlySolo()
    NS["test"].body(c, tier="cluster", build_images=False, pytest_args="-k preflight", setup=False)
    assert len(c.commands) == 2


# Letters sbatch, qsub and bsub use for where and when a job runs (sbatch -p partition, -q QOS,
# -t time, -w node list, -A account, -N nodes; qsub -q queue, -A account, -N name, -J array;
# bsub -q queue, -W run limit, -w dependency, -P project, -J name): a Slurm or PBS user typing
# one of them means that, so `invoke manifests` gives none of them another meaning.
BATCH_PLACEMENT = set("pqtwANJWP")


def test_manifests_takes_no_letter_a_batch_user_reads_as_a_placement():
    assert not set(_shorts("manifests").values()) & BATCH_PLACEMENT, _shorts("manifests")
