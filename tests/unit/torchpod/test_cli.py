"""The command line through main(argv, env): output formats, exit codes, one-line errors."""

from __future__ import annotations

import io
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

import torchpod.cli as cli

SLURM = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "gpu[001-002]",
    "SLURM_NODEID": "1",
    "SLURM_STEP_ID": "0",
    "SLURM_GPUS_ON_NODE": "4",
    "TORCHPOD_HOSTNAME": "gpu002",
}


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_plan_json(capsys):
    assert cli.main(["plan", "--", "train.py", "--epochs", "3"], SLURM) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scheduler"] == "slurm" and data["node_rank"] == 1
    assert data["script"] == "train.py" and data["script_args"] == ["--epochs", "3"]
    assert data["command"][-3:] == ["train.py", "--epochs", "3"]
    assert "--rdzv-endpoint=gpu001:29400" in data["torchrun_args"]


# the eleventh of twelve Volcano pods: torch's own c10d order would make it group rank 2
# (job-worker-0, -1, -10, -11, -2, ...), torchpod's makes it 10
VOLCANO_12 = {"VC_TASK_INDEX": "10", "VC_WORKER_NUM": "12", "TORCHPOD_HOSTNAME": "job-worker-10",
              "VC_WORKER_HOSTS": ",".join(f"job-worker-{i}.job" for i in range(12))}


def test_plan_states_the_group_rank_torch_will_give_and_the_launch_line_says_it(capsys, launched):
    assert cli.main(["plan", "--format=json"], VOLCANO_12) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["node_rank"], data["group_rank"]) == (10, 10)
    assert data["rdzv_conf"]["torchpod_order"] == "10" and "node index" in data["rank_order"]
    assert cli.main(["plan", "--format=text"], VOLCANO_12) == 0
    ranks = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("ranks")]
    assert len(ranks) == 1 and "group rank 10 (node index" in ranks[0], ranks
    assert cli.main(["run", "train.py"], VOLCANO_12) == 0
    assert "torchpod: volcano: node 10 of 12 (group rank 10)," in capsys.readouterr().err


def _shell_command(out: str) -> list[str]:
    """The words of TORCHPOD_COMMAND in a shell plan (its only assignment besides exports)."""
    (line,) = [ln for ln in out.splitlines() if ln.startswith("TORCHPOD_COMMAND=")]
    (value,) = shlex.split(line[len("TORCHPOD_COMMAND="):])
    return shlex.split(value)


def test_plan_shell_assigns_the_command_and_says_how_to_forward_args(capsys):
    assert cli.main(["plan", "--format=shell"], SLURM) == 0
    out = capsys.readouterr().out
    words = _shell_command(out)
    assert words[1:3] == ["-m", "torchpod.torchrun"] and "--local-addr=gpu002" in words
    assert out.strip().splitlines()[-1].endswith('eval "exec $TORCHPOD_COMMAND \\"\\$@\\""')
    # nothing but comments and assignments: eval runs no command
    assert all(ln.startswith(("#", "export ", "TORCHPOD_COMMAND=")) for ln in out.strip().splitlines())


def test_plan_shell_with_script_quotes_arguments(capsys):
    assert cli.main(["plan", "--format", "shell", "--", "train.py", "a b"], {}) == 0
    assert _shell_command(capsys.readouterr().out)[-2:] == ["train.py", "a b"]


@pytest.mark.parametrize(
    "argv, env, needle",
    [
        (["plan", "--format", "yaml"], {}, "--format"),
        (["plan"], {"WORLD_SIZE": "4"}, "WORLD_SIZE='4'"),
        (["plan"], {"TORCHPOD_SCHEDULER": "lsf"}, "TORCHPOD_SCHEDULER='lsf'"),
        (["run"], {}, "no script given"),
        (["run", "--bogus", "train.py"], {}, "--bogus"),
        (["run", "no_such_script.py"], {"CUDA_VISIBLE_DEVICES": ""}, "script"),
        (["--nnodes", "2", "train.py"], {}, "rendezvous endpoint"),
        (["plan", "--max-restarts", "many"], {}, "--max-restarts"),
        (["plan"], {"PBS_JOBID": "1.pbs", "PBS_NODEFILE": "/nonexistent/nodes"}, "PBS_NODEFILE"),
        (["plan", "--", "t.py"], {"TORCHPOD_PREFLIGHT": "yes"}, "TORCHPOD_PREFLIGHT='yes' is not a switch"),
        (["plan"], {"MASTER_ADDR": "node0:", "WORLD_SIZE": "2", "RANK": "0"}, "'node0:' ends in ':' with no port"),
        (["doctor", "--sysfs-root", "/dev/null"], {}, "--sysfs-root='/dev/null' is not a directory"),
        (["doctor", "--sysfs-root", "/nonexistent"], {},
         "--sysfs-root='/nonexistent' does not exist; expected an existing directory holding sysfs"),
        (["doctor", "--sysfs-root=/sys\x00x"], {}, "--sysfs-root='/sys\\x00x' cannot be read"),
        (["plan"], {"TORCHPOD_SYSFS_ROOT": "/dev/null"}, "TORCHPOD_SYSFS_ROOT='/dev/null' is not a directory"),
        (["plan", "--", "t.py"], {"TORCHPOD_PREFLIGHT": "1\n$(id)"}, "TORCHPOD_PREFLIGHT="),
        (["plan", "--", "t.py"], {"TORCHPOD_PREFLIGHT": "1", "TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED": "yes"},
         "TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED='yes' is not a switch"),
        (["plan"], {"PET_RDZV_CONF": "join_timeout=30\nis_host=true"}, "PET_RDZV_CONF='join_timeout=30\\nis_host"),
        (["plan", "--standalone", "--nnodes", "2"], {}, "--nnodes='2' contradicts standalone (one node)"),
        (["plan", "--standalone", "--nnodes", "1:4"], {}, "--nnodes='1:4' contradicts standalone (one node)"),
        (["plan", "--nnodes", "2"], {**SLURM, "SLURM_JOB_NODELIST": "gpu002", "SLURM_NODEID": "0"},
         "--nnodes='2' does not fit the 1 host slurm lists; expected 1 "),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, env, needle, capsys):
    assert cli.main(argv, env) == 2
    err = capsys.readouterr()
    line = one_line(err.err)
    assert line.startswith("torchpod: error: ") and needle in line
    assert err.out == ""


def test_run_refuses_an_option_the_installed_torchrun_lacks_before_it_starts(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "site" / "torch"
    (fake / "distributed").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "distributed" / "run.py").write_text('parser.add_argument("--log-dir", "--log_dir")\n')
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    (tmp_path / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    started = []
    monkeypatch.setattr(cli, "supervise", lambda *a, **k: started.append(a) or 0)
    assert cli.main(["run", "--shutdown-timeout", "60", "train.py"], {"CUDA_VISIBLE_DEVICES": ""}) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("torchpod: error: --shutdown-timeout: the installed torch's torchrun has no such option")
    assert not started
    assert cli.main(["run", "--log-dir", str(tmp_path / "logs"), "train.py"], {"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert len(started) == 1 and f"--log-dir={tmp_path / 'logs'}" in started[0][0]


def test_version_and_help(capsys):
    assert cli.main(["--version"], {}) == 0
    assert capsys.readouterr().out.startswith("torchpod ")
    assert cli.main(["--help"], {}) == 0
    assert "torchpod run" in capsys.readouterr().out
    assert cli.main([], {}) == 2


@pytest.fixture
def launched(monkeypatch, tmp_path):
    """supervise() recorded instead of run, in a folder that holds train.py."""
    (tmp_path / "train.py").write_text("print('train')\n")
    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(cli, "supervise", lambda argv, env, handled=None, child=None, then_ignore=False:
                        calls.append((argv, env)) or 0)
    return calls


@pytest.mark.parametrize(
    "argv",
    [
        ["train.py", "--epochs", "3"],
        ["run", "train.py", "--epochs", "3"],
        ["run", "--", "train.py", "--epochs", "3"],
    ],
)
def test_first_word_not_a_subcommand_means_run(argv, launched):
    assert cli.main(argv, {"CUDA_VISIBLE_DEVICES": ""}) == 0
    (cmd, env), = launched
    # torchpod.torchrun: torch.distributed.run's main with rendezvous timeouts explained
    assert cmd[:3] == [sys.executable, "-m", "torchpod.torchrun"]
    assert cmd[-3:] == ["train.py", "--epochs", "3"]
    assert "--nnodes=1" in cmd


def test_explicit_flags_win_over_detection(launched):
    argv = ["run", "--nnodes", "2", "--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "etcd:2379",
            "--rdzv-conf", "join_timeout=30", "--max_restarts=4", "train.py"]
    assert cli.main(argv, SLURM) == 0
    (cmd, _), = launched
    assert "--rdzv-backend=etcd-v2" in cmd and "--rdzv-endpoint=etcd:2379" in cmd
    assert "--max-restarts=4" in cmd and "--rdzv-conf=torchpod_order=1,join_timeout=30" in cmd
    assert "--local-addr=gpu002" in cmd  # still this node's listed name


def test_runtime_failure_exits_1(monkeypatch, capsys, tmp_path):
    (tmp_path / "train.py").write_text("print('train')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    assert cli.main(["train.py"], {"CUDA_VISIBLE_DEVICES": ""}) == 1
    summary, error = capsys.readouterr().err.strip().splitlines()
    assert summary.startswith("torchpod: standalone: node 0 of 1")  # what it was about to run
    assert error.startswith("torchpod: error: cannot start")


def test_plan_reads_nothing_from_os_environ_and_writes_nothing(monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_ID", "1")  # would be a broken Slurm job if read
    before = dict(os.environ)
    assert cli.main(["plan"], {}) == 0
    assert json.loads(capsys.readouterr().out)["scheduler"] == "standalone"
    assert dict(os.environ) == before


def test_double_dash_is_never_an_option_value():
    # found by hypothesis: `--rdzv-endpoint --` must not hand "--" to torchrun as an endpoint
    from torchpod.errors import InputError
    from torchpod.torchrun_flags import split_command_line

    with pytest.raises(InputError, match="--rdzv-endpoint needs a value"):
        split_command_line(["--rdzv-endpoint", "--", "train.py"])
    with pytest.raises(InputError, match="--rdzv-endpoint needs a value"):
        split_command_line(["--rdzv-endpoint=--", "train.py"])


def test_plan_shows_the_preflight_first_command_run_would_start(capsys):
    env = {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_JOB_NODELIST": "n1,n2", "SLURM_NNODES": "2",
           "SLURM_NODEID": "0", "SLURM_STEP_TASKS_PER_NODE": "1(x2)", "CUDA_VISIBLE_DEVICES": "",
           "TORCHPOD_HOSTNAME": "n1", "TORCHPOD_PREFLIGHT": "1"}
    assert cli.main(["plan", "--", "train.py", "--lr", "1"], env) == 0
    plan = json.loads(capsys.readouterr().out)
    command = plan["command"]
    assert command[command.index("--module"):] == ["--module", "torchpod.preflight", "--then", "script",
                                                   "train.py", "--lr", "1"]
    assert plan["nnodes"] == "2" and any("TORCHPOD_PREFLIGHT=1" in n for n in plan["notes"])


@pytest.mark.parametrize("argv, needle", [
    (["bench", "allreduce", "--min-bytes", "\u00b2"], "torchpod bench allreduce: argument --min-bytes"),
    (["bench", "allreduce", "--iters", "\u0663"], "'\u0663' is not a whole number"),
    (["run", "-m", "torchpod.preflight", "--floor-gbps", "nan"], "torchpod preflight: argument --floor-gbps"),
    (["plan", "--module", "--", "torchpod.preflight", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_a_torchpod_workloads_options_are_checked_before_torchrun_starts(argv, needle, monkeypatch, capsys):
    started = []
    monkeypatch.setattr(cli, "supervise", lambda *a, **k: started.append(a) or 0)
    assert cli.main(argv, {"CUDA_VISIBLE_DEVICES": ""}) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and not started


# --- help on every command ------------------------------------------------------------------

@pytest.mark.parametrize("argv, usage", [
    (["plan", "--help"], "usage: torchpod plan "),
    (["plan", "-h"], "usage: torchpod plan "),
    (["plan", "--nnodes", "2", "--help"], "usage: torchpod plan "),
    (["run", "--help"], "usage: torchpod run "),
    (["doctor", "--help"], "usage: torchpod doctor "),
    (["doctor", "--format", "json", "-h"], "usage: torchpod doctor "),
    (["bench", "--help"], "usage: torchpod bench "),
    (["bench", "allreduce", "--help"], "usage: torchpod bench allreduce "),
    (["preflight", "--help"], "usage: torchpod preflight "),
    (["preflight", "--floor-gbps", "40", "-h"], "usage: torchpod preflight "),
    (["help", "doctor"], "usage: torchpod doctor "),
])
def test_every_command_prints_its_help_and_exits_0(argv, usage, capsys, monkeypatch):
    started = []
    monkeypatch.setattr(cli, "supervise", lambda *a, **k: started.append(a) or 0)
    # a bad setting does not stand between a user and the help that explains it
    assert cli.main(argv, {"TORCHPOD_DOCTOR": "yes", "TORCHPOD_RDZV_PORT": "http"}) == 0
    out, err = capsys.readouterr()
    assert out.startswith(usage) and err == "" and not started
    assert "environment (read by `torchpod " in out


def test_a_help_flag_after_the_script_is_the_scripts(launched):
    assert cli.main(["run", "train.py", "--help"], {"CUDA_VISIBLE_DEVICES": ""}) == 0
    (cmd, _), = launched
    assert cmd[-2:] == ["train.py", "--help"]


# where `python -m torchpod.preflight` finds the launcher: an editable install is no path entry
FINDS_TORCHPOD = {"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(Path(cli.__file__).parent.parent)}


def test_preflight_help_after_then_belongs_to_the_command_it_starts(launched, capsys):
    assert cli.main(["preflight", "--then", "script", "train.py", "--help"], FINDS_TORCHPOD) == 0
    (cmd, _), = launched
    assert cmd[-6:] == ["--module", "torchpod.preflight", "--then", "script", "train.py", "--help"][-6:]


def test_main_help_names_every_scheduler_of_the_registry(capsys):
    from torchpod.schedulers import SCHEDULERS

    assert cli.main(["--help"], {}) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert ", ".join(m.NAME for m in SCHEDULERS) in flat


# --- the settings a command reads are the ones its help lists ---------------------------------

BAD = {"a switch": "yes", "a TCP port": "http", "a number of seconds": "soon", "a name": "a b",
       "a host name": "a b", "a path": "a\x1bb", "text": "a\x1bb", "a stall window": "0"}


def _command_line(command: str) -> list[str]:
    return {"plan": ["plan", "--", "train.py"], "run": ["run", "train.py"], "doctor": ["doctor"],
            "bench": ["bench", "allreduce"], "preflight": ["preflight"]}[command]


@pytest.mark.parametrize("command", ["plan", "run", "doctor", "bench", "preflight"])
def test_a_command_refuses_a_bad_value_of_each_setting_it_reads_and_of_no_other(command, launched, tmp_path,
                                                                                 monkeypatch, capsys):
    from torchpod import doctor
    from torchpod.contract import SETTINGS

    monkeypatch.setattr(doctor, "gather", lambda env, sysfs, gpus: doctor.Machine(sysfs_root=sysfs, gpu_count=1))
    (tmp_path / "sys").mkdir()
    base = {"CUDA_VISIBLE_DEVICES": "", "TORCHPOD_SYSFS_ROOT": str(tmp_path / "sys"), "HOME": str(tmp_path),
            "TORCHPOD_HOSTNAME": "n1"}
    for setting in SETTINGS:
        value = BAD[setting.form.what]
        code = cli.main(_command_line(command), {**base, setting.name: value})
        err = capsys.readouterr().err
        if command in setting.commands:
            assert code == 2 and one_line(err).startswith(f"torchpod: error: {setting.name}="), (setting.name, err)
        else:
            assert setting.name not in err, (setting.name, err)


def test_doctor_yes_is_refused_not_read_as_off(launched, capsys):
    assert cli.main(["run", "train.py"], {"TORCHPOD_DOCTOR": "yes", "CUDA_VISIBLE_DEVICES": ""}) == 2
    line = one_line(capsys.readouterr().err)
    assert "TORCHPOD_DOCTOR='yes' is not a switch; expected 1 or 0" in line and not launched


# --- preflight as a command -------------------------------------------------------------------

def test_preflight_runs_as_run_dash_m_runs_it(launched):
    env = FINDS_TORCHPOD
    assert cli.main(["preflight", "--floor-gbps", "40", "--json", "out.json"], env) == 0
    assert cli.main(["run", "-m", "torchpod.preflight", "--floor-gbps", "40", "--json", "out.json"], env) == 0
    (subcommand, _), (run_m, _) = launched
    assert subcommand == run_m
    assert subcommand[subcommand.index("--module"):] == ["--module", "torchpod.preflight", "--floor-gbps", "40",
                                                         "--json", "out.json"]


def test_preflight_options_are_checked_before_torchrun_starts(launched, capsys):
    assert cli.main(["preflight", "--floor-gbps", "fast"], {"CUDA_VISIBLE_DEVICES": ""}) == 2
    assert "torchpod preflight: argument --floor-gbps" in one_line(capsys.readouterr().err) and not launched


# --- did you mean -------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, hint", [
    (["plan", "--nnode", "2"], "unknown option '--nnode' before the script; did you mean --nnodes?"),
    (["plan", "--rdzv-endpont=n1:29400"], "did you mean --rdzv-endpoint?"),
    (["plan", "--formt", "json"], "did you mean --format?"),
    (["run", "--max-restart", "3", "train.py"], "did you mean --max-restarts?"),
    (["doctor", "--sysfs-rot", "/sys"], "unknown doctor option '--sysfs-rot'; did you mean --sysfs-root?"),
    (["bench", "allreduc"], "bench 'allreduc' is not a benchmark; did you mean allreduce?"),
    (["plna"], "'plna' is neither a command nor a file in "),
    (["docter", "--format", "json"], ""),  # an option follows: a script's own, not a misspelt command
    (["plan", "--format", "jsn"], "did you mean json?"),
    (["help", "doctr"], "did you mean doctor?"),
])
def test_a_misspelt_word_gets_the_closest_known_one_in_its_one_line(argv, hint, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv, {"CUDA_VISIBLE_DEVICES": ""}) == 2
    line = one_line(capsys.readouterr().err)
    assert hint in line
    if argv == ["plna"]:
        assert "did you mean `torchpod plan`?" in line


def test_a_script_named_like_a_command_still_runs(launched, tmp_path):
    (tmp_path / "plna").write_text("print('mine')\n")
    assert cli.main(["plna"], {"CUDA_VISIBLE_DEVICES": ""}) == 0
    (cmd, _), = launched
    assert cmd[-1] == "plna"


def test_nothing_close_gets_no_suggestion(capsys):
    assert cli.main(["plan", "--zzz"], {}) == 2
    assert "did you mean" not in capsys.readouterr().err


# --- the process edges: a closed pipe, a removed working directory ------------------------------

def test_a_closed_stdout_ends_quietly_with_141():
    import subprocess

    read, write = os.pipe()
    os.close(read)  # the reader is gone before torchpod writes, as `| head -3` is after its lines
    try:
        done = subprocess.run([sys.executable, "-m", "torchpod", "plan", "--format", "json"], stdout=write,
                              stderr=subprocess.PIPE, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=60)
    finally:
        os.close(write)
    assert done.returncode == 141 and done.stderr == b""


def test_a_broken_pipe_inside_main_is_the_same_exit(monkeypatch, capsys):
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert cli.main(["--version"], {}) == cli.CLOSED_PIPE == 141


def test_run_from_a_removed_working_directory_is_one_line(tmp_path):
    import subprocess

    gone = tmp_path / "gone"
    gone.mkdir()
    code = "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); from torchpod.cli import main; " \
           "sys.exit(main(['run', 'train.py'], {'CUDA_VISIBLE_DEVICES': ''}))"
    done = subprocess.run([sys.executable, "-c", code, str(gone)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("torchpod: error: the working directory cannot be read") and "cd to one" in line


# --- plan formats: text for people, JSON for programs ---------------------------------------------

def test_plan_is_text_on_a_terminal_and_json_when_piped(monkeypatch, capsys):
    monkeypatch.setattr(cli, "stdout_is_terminal", lambda: True)
    assert cli.main(["plan", "--", "train.py"], SLURM) == 0
    text = capsys.readouterr().out
    assert text.startswith("torchpod ") and "\n  scheduler   slurm\n" in text
    assert cli.main(["plan", "--format", "json", "--", "train.py"], SLURM) == 0  # asked for: JSON on a terminal too
    assert json.loads(capsys.readouterr().out)["scheduler"] == "slurm"
    monkeypatch.setattr(cli, "stdout_is_terminal", lambda: False)
    assert cli.main(["plan", "--", "train.py"], SLURM) == 0
    assert json.loads(capsys.readouterr().out)["scheduler"] == "slurm"
    assert cli.main(["plan", "--format=text", "--", "train.py"], SLURM) == 0  # asked for: text in a pipe too
    assert capsys.readouterr().out == text


def test_a_real_terminal_gets_the_text_plan():
    import pty
    import subprocess

    leader, follower = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "torchpod", "plan"], stdout=follower, stderr=subprocess.PIPE,
                              env={**os.environ, **SLURM, "CUDA_VISIBLE_DEVICES": ""}, timeout=60)
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0, done.stderr
    assert out.decode().startswith("torchpod ") and "scheduler   slurm" in out.decode()


def test_plan_refuses_a_setting_run_would_refuse(launched, capsys):
    assert cli.main(["plan", "--format", "json", "--", "train.py"], {"TORCHPOD_DOCTOR": "yes",
                                                                     "CUDA_VISIBLE_DEVICES": ""}) == 2
    assert "TORCHPOD_DOCTOR='yes' is not a switch" in one_line(capsys.readouterr().err) and not launched


def test_bench_without_a_name_is_one_line_naming_the_benchmarks(launched, capsys):
    assert cli.main(["bench"], {}) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected one of allreduce" in err and not launched


def test_a_misspelt_top_level_option_gets_a_did_you_mean(launched, capsys):
    assert cli.main(["--versoin"], {}) == 2
    err = one_line(capsys.readouterr().err)
    assert "unknown option '--versoin'; did you mean --version?" in err and not launched


def test_no_torchrun_option_is_mistaken_for_a_misspelt_top_level_one():
    from torchpod.torchrun_flags import _BY_SPELLING
    from torchpod.words import did_you_mean

    assert [s for s in _BY_SPELLING if did_you_mean(s, ("--version", "--help"))] == []
