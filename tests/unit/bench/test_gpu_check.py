"""bench/gpu_check.py and its helpers (bench/_gpu_steps.py, _gpu_judges.py, _gpu_processes.py),
without torch or a GPU: the check's verdict and exit code, which steps run and why the others
do not, how each step's output is judged, the table a person reads, the --out folder it
refuses (a file, a non-empty folder, a link), and the logs it reads back."""

from __future__ import annotations

import json
import os
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paths import bench_helper, bench_script

gc = bench_script("gpu_check")  # the options, the report, main
# its helpers, the very modules it imports (a patch of one is what the program runs)
gsteps = bench_helper("_gpu_steps")  # the steps, their runners, skip_reason, run_steps
judges = bench_helper("_gpu_judges")  # each step's output judged
processes = bench_helper("_gpu_processes")  # a command under a limit, its tree stopped, its logs read
SPECS = {s.name: s for s in gsteps.STEPS}
GPU = {"torch": "2.9.1+cu128", "cuda_build": "12.8", "device_count": 1, "devices": ["NVIDIA H100 80GB HBM3"],
       "torchvision": "0.24.1", "numpy": "2.3.0", "nccl": "2.27.7"}
CPU = {"torch": "2.13.0+cu130", "cuda_build": "13.0", "device_count": 0, "devices": [], "torchvision": None,
       "numpy": None}


def _step(name, verdict, **facts):
    return gsteps.Step(name, "what", verdict, facts=facts)


def test_the_program_runs_the_steps_of_the_helpers_these_tests_reach():
    # one module object each: a test that patches a helper patches what the program runs
    assert gc.run_steps is gsteps.run_steps and gc.Context is gsteps.Context and gc.one_line is judges.one_line
    assert gsteps.execute is processes.execute and gsteps.judge_doctor is judges.judge_doctor


# -- the check's verdict and exit code ---------------------------------------------------------

@pytest.mark.parametrize("facts, verdicts, expected", [
    (GPU, ["ok", "ok", "skipped"], ("ok", 0)),
    (GPU, ["ok", "failed"], ("failed", 1)),
    (CPU, ["ok", "skipped", "skipped"], ("no-gpu", 3)),
    (CPU, ["ok", "failed", "skipped"], ("failed", 1)),  # a failure on a CPU machine is still a failure
    ({"torch_error": "ModuleNotFoundError: No module named 'torch'"}, ["failed", "skipped"], ("no-torch", 4)),
    ({}, ["failed", "skipped"], ("failed", 1)),  # the probe itself failed: not "no torch"
])
def test_the_verdict_and_exit_code(facts, verdicts, expected):
    steps = [{"verdict": v} for v in verdicts]
    assert gc.overall(steps, facts) == expected
    assert expected[1] in gc.EXIT_CODES and len(set(gc.EXIT_CODES)) == 5


# -- which steps run ---------------------------------------------------------------------------

def test_with_no_gpu_the_gpu_steps_are_skipped_and_the_others_run():
    reasons = {n: gsteps.skip_reason(s, CPU, {}, 400.0) for n, s in SPECS.items()}
    gpu_only = {n for n, s in SPECS.items() if s.gpu_only}
    assert {"allreduce", "ddp", "preflight", "ddp-nccl-log", "allreduce-nccl-log"} <= gpu_only
    assert {n: r for n, r in reasons.items() if n in gpu_only} == {n: judges.NO_GPU for n in gpu_only}
    assert {n: r for n, r in reasons.items() if n not in gpu_only} == {n: None for n in SPECS if n not in gpu_only}


def test_a_rehearsal_runs_the_gpu_steps_on_the_cpu_but_still_needs_their_modules():
    assert gsteps.skip_reason(SPECS["allreduce"], CPU, {}, 400.0, rehearse=True) is None
    assert gsteps.skip_reason(SPECS["ddp"], CPU, {}, 400.0, rehearse=True).startswith("torchvision is not importable")
    assert "all_gather_object" in gsteps.skip_reason(SPECS["preflight"], CPU, {}, 400.0, rehearse=True)


def test_a_log_step_needs_its_run_to_have_written_an_nccl_log():
    spec = SPECS["ddp-nccl-log"]
    assert gsteps.skip_reason(spec, GPU, {}, 400.0) == "ddp did not run"
    assert gsteps.skip_reason(spec, GPU, {"ddp": _step("ddp", "skipped")}, 400.0) == "ddp did not run"
    no_log = {"ddp": _step("ddp", "failed", nccl_log=None)}
    assert gsteps.skip_reason(spec, GPU, no_log, 400.0) == "ddp wrote no NCCL log"
    # a run that failed after NCCL started still has a log worth judging
    assert gsteps.skip_reason(spec, GPU, {"ddp": _step("ddp", "failed", nccl_log="nccl/ddp.h.1.log")}, 400.0) is None


def test_without_torch_only_the_facts_are_gathered():
    facts = {"torch_error": "ModuleNotFoundError: No module named 'torch'"}
    assert gsteps.skip_reason(SPECS["environment"], facts, {}, 400.0) is None
    assert gsteps.skip_reason(SPECS["doctor"], facts, {}, 400.0).startswith("torch is not importable (ModuleNotFound")
    assert gsteps.skip_reason(SPECS["plan"], {}, {}, 400.0) == "the environment step did not say whether torch works"


def test_a_step_with_too_little_time_left_is_skipped_not_started():
    assert gsteps.skip_reason(SPECS["doctor"], GPU, {}, gsteps.MIN_STEP_S - 0.1).startswith("out of time")
    assert gsteps.skip_reason(SPECS["doctor"], GPU, {}, gsteps.MIN_STEP_S) is None


def test_every_step_has_a_runner_and_reads_only_earlier_steps():
    names = [s.name for s in gsteps.STEPS]
    assert set(names) == set(gsteps.RUNNERS) and len(names) == len(set(names))
    for i, spec in enumerate(gsteps.STEPS):
        assert not spec.log_of or spec.log_of in names[:i], spec
        assert set(spec.needs) <= set(gsteps.NEEDS_WHY), spec
    assert names[:2] == ["nvidia-smi", "environment"]  # the facts every later step is gated on
    # each step's own limit fits inside the default budget, and the sum of the CPU steps leaves the GPU ones time
    assert all(s.timeout_s < gc.DEFAULT_TIMEOUT_S - gc.RESERVE_S for s in gsteps.STEPS)


# -- judging a step's output -------------------------------------------------------------------

def _plan(nproc="1", nnodes="1", script="/x.py", args=(), notes=()):
    return json.dumps({"scheduler": "standalone", "nnodes": nnodes, "nproc_per_node": nproc, "script": script,
                       "script_args": list(args), "notes": list(notes), "version": "0.2.0"})


def test_the_plan_must_start_one_process_per_gpu_torch_sees():
    assert judges.judge_plan(0, _plan("1"), 1)[0] == "ok"
    assert judges.judge_plan(0, _plan("1"), 0)[2]["expected_backend"] == "gloo"
    assert judges.judge_plan(0, _plan("8"), 8)[2]["expected_backend"] == "nccl"
    verdict, reason, _ = judges.judge_plan(0, _plan("1"), 2)  # nvidia-smi counted 1, CUDA sees 2 (or MIG)
    assert verdict == "failed" and "expected nproc 2" in reason
    assert judges.judge_plan(0, _plan("1", nnodes="2"), 1)[0] == "failed"
    assert judges.judge_plan(2, "torchpod: error: bad", 1)[:2] == ("failed", "exit 2: no plan printed")


def test_preflight_first_on_one_node_keeps_the_script():
    note = "TORCHPOD_PREFLIGHT=1: one node, no pair of nodes to compare: preflight skipped"
    verdict, reason, _ = judges.judge_preflight_first(0, _plan(script="/x.py", notes=["other", note]), "/x.py")
    assert (verdict, reason) == ("ok", note)
    wrapped = _plan(script="torchpod.preflight", args=["--then", "script", "/x.py"])
    assert judges.judge_preflight_first(0, wrapped, "/x.py")[0] == "failed"


def _doctor(*rows, **extra):
    checks = [{"name": n, "status": s, "code": c, "detail": f"{n} detail", "fix": ""} for n, s, c in rows]
    return json.dumps({"checks": checks, **extra})


def test_the_doctor_passes_on_its_own_exit_code_and_with_a_gpu_must_see_it():
    ok_gpu = _doctor(("driver", "ok", "driver.version.ok"), ("gpus", "ok", "doctor.gpus.ok"))
    no_gpu = _doctor(("driver", "warn", "driver.version.unknown"), ("gpus", "warn", "doctor.gpus.none"))
    assert judges.judge_doctor(0, ok_gpu, 1)[:2] == ("ok", "exit 0")
    assert judges.judge_doctor(0, no_gpu, 0)[:2] == ("ok", "exit 0; warn: driver, gpus")
    verdict, reason, _ = judges.judge_doctor(0, no_gpu, 1)
    assert verdict == "failed" and "doctor.gpus.none" in reason and "nvidia-smi -L" in reason
    failing = _doctor(("driver", "fail", "driver.version.too-old"), ("gpus", "ok", "doctor.gpus.ok"))
    assert judges.judge_doctor(1, failing, 1)[:2] == ("failed", "exit 1: driver: driver detail")
    assert judges.judge_doctor(1, "Traceback (most recent call last):", 1)[0] == "failed"


def test_the_doctors_log_verdict_is_kept():
    out = _doctor(("gpus", "ok", "doctor.gpus.ok"), transport="socket", network="Socket", nccl_version="2.27.7",
                  gdrdma=False, evidence=["a", "b", "c", "d"], log_notes=[])
    verdict, reason, facts = judges.judge_doctor(0, out, 1)
    assert (verdict, reason) == ("ok", "exit 0, transport socket")
    assert facts["transport"] == "socket" and facts["evidence"] == ["a", "b", "c"] and facts["network"] == "Socket"
    assert judges.judge_doctor(1, out, 1)[:2] == ("failed", "exit 1: sockets on a node with RDMA hardware")
    one_node = out.replace('"log_notes": []', '"log_notes": [], "nodes": 1')
    assert one_node != out
    assert judges.judge_doctor(0, one_node, 1)[1] == "exit 0, transport socket (one node: nothing crossed a network)"


def _result(rank, backend="nccl", ok=True, **extra):
    return {"workload": "allreduce_bench", "rank": rank, "backend": backend, "ok": ok, **extra}


def test_a_run_needs_one_ok_result_per_rank_on_the_expected_backend():
    two = [_result(0, peak_busbw_gbps=301.5), _result(1)]
    assert judges.judge_run(two, "nccl", 2)[:2] == ("ok", "2 ranks on nccl, peak_busbw_gbps 301.5")
    assert judges.judge_run(two[:1], "nccl", 2)[1] == "1 result lines, expected 2 (one per rank)"
    assert judges.judge_run([_result(0, backend="gloo")], "nccl", 1)[1] == "backend gloo, expected nccl"
    assert judges.judge_run([_result(0, ok=False)], "nccl", 1)[0] == "failed"
    drift = [_result(0, param_checksum=1.0), _result(1, param_checksum=1.5)]
    verdict, _, facts = judges.judge_run(drift, "nccl", 2)
    assert verdict == "failed" and facts["replicas_in_sync"] is False


def test_one_rank_shows_the_copy_rate_not_a_bus_bandwidth_of_zero():
    """The H200 check's first run printed "peak_busbw_gbps 0": 2(n-1)/n is 0 for one rank."""
    rows = [{"bytes": 1024, "algbw_gbps": 0.04, "busbw_gbps": 0.0}, {"bytes": 1 << 24, "algbw_gbps": 1057.4,
                                                                       "busbw_gbps": 0.0}]
    one = [_result(0, world_size=1, peak_busbw_gbps=0.0, rows=rows)]
    verdict, reason, facts = judges.judge_run(one, "nccl", 1)
    assert (verdict, reason) == ("ok", "1 ranks on nccl, peak_algbw_gbps_one_rank 1057")
    assert "peak_busbw_gbps" not in facts
    broken = [_result(0, world_size=1, peak_busbw_gbps=0.0, rows=[{"algbw_gbps": "x"}, 7])]
    assert judges.judge_run(broken, "nccl", 1)[:2] == ("ok", "1 ranks on nccl")
    two = [_result(0, world_size=2, peak_busbw_gbps=301.5, rows=rows), _result(1, world_size=2)]
    assert judges.judge_run(two, "nccl", 2)[1] == "2 ranks on nccl, peak_busbw_gbps 301.5"


def test_result_lines_are_found_behind_any_prefix_and_garbage_is_ignored():
    text = "\n".join(["step 1 loss 2.3", "[rank0]: TORCHPOD_RESULT " + json.dumps(_result(0)),
                      "TORCHPOD_RESULT {not json", "0: TORCHPOD_RESULT " + json.dumps(_result(1)), "\x1b[31mred"])
    assert [r["rank"] for r in judges.results(text)] == [0, 1]


@pytest.mark.parametrize("stdout", ['{"checks": [1, "x", null]}', '{"checks": "fail"}', "[]", "{", "\x00{}",
                                    '{"checks": [{"name": "gpus"}], "evidence": 5}'])
def test_doctor_output_no_judge_foresaw_is_a_failed_step_not_a_crash(stdout):
    assert judges.judge_doctor(0, stdout, 1)[0] == "failed"


def test_result_lines_of_any_shape_are_judged_not_crashed_on():
    text = "TORCHPOD_RESULT [1]\nTORCHPOD_RESULT " + json.dumps(
        {"backend": "nccl", "ok": True, "steps_per_s": None, "param_checksum": [1], "final_loss": "nan"})
    verdict, reason, _ = judges.judge_run(judges.results(text), "nccl", 1)
    assert (verdict, reason) == ("ok", "1 ranks on nccl")


def test_a_step_that_crashes_the_check_is_a_failed_row_and_the_rest_still_run(tmp_path, monkeypatch):
    def broken(ctx, spec):
        raise KeyError("checks")

    monkeypatch.setitem(gsteps.RUNNERS, "doctor", broken)
    monkeypatch.setitem(gsteps.RUNNERS, "plan", lambda ctx, spec: gsteps.Step(spec.name, spec.what, "ok", "fine"))
    ctx = gsteps.Context(tmp_path, sys.executable, {}, deadline=float("inf"), facts=dict(CPU))
    steps = gsteps.run_steps(ctx, (SPECS["doctor"], SPECS["plan"], SPECS["ddp"]))
    assert [(s.verdict, s.reason) for s in steps] == [("failed", "the check itself failed: KeyError: 'checks'"),
                                                      ("ok", "fine"), ("skipped", judges.NO_GPU)]


TORCHRUN_FAILURE = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/x/torchpod/bench_allreduce.py", line 99, in _row
[rank0]:     dist.all_reduce(took, op=dist.ReduceOp.MAX)
[rank0]: RuntimeError: No backend type associated with device type cpu
E1126 19:15:11 api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 2737)
Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
"""


def test_the_reason_is_the_workers_error_not_torchruns_summary():
    assert judges.last_error(TORCHRUN_FAILURE) == "RuntimeError: No backend type associated with device type cpu"
    assert judges.last_error("just\nlines\n") == "lines" and judges.last_error("") == ""


def test_preflight_on_one_node_must_refuse_in_its_one_line():
    line = "torchpod: error: preflight found 1 node; expected 2 or more (pairs of nodes are compared)"
    verdict, reason, facts = judges.judge_preflight(1, f"noise\n{line}\n{TORCHRUN_FAILURE}")
    assert verdict == "ok" and facts["refusal"] == line and line in reason
    assert judges.judge_preflight(0, line)[0] == "failed"  # exit 0 on one node would claim pairs were compared
    verdict, reason, _ = judges.judge_preflight(1, TORCHRUN_FAILURE)
    assert verdict == "failed" and "No backend type" in reason


def test_the_environment_is_judged_against_what_nvidia_smi_listed():
    assert judges.judge_environment(GPU, 1)[0] == "ok"
    assert judges.judge_environment(CPU, 0) == ("ok", "no CUDA device visible; torch 2.13.0+cu130, CUDA build 13.0")
    verdict, reason = judges.judge_environment(dict(CPU, cuda_build=None), 2)
    assert verdict == "failed" and "nvidia-smi lists 2 GPUs but torch sees none" in reason
    assert judges.judge_environment({"torch_error": "ImportError: libcudart"}, 0)[0] == "failed"
    assert judges.judge_environment({}, 0) == ("failed", "the probe printed no facts")


def test_nvidia_smi_rows():
    verdict, reason, facts = judges.judge_nvidia_smi(0, "NVIDIA H100 80GB HBM3, 570.124.06, 81559 MiB\n")
    assert verdict == "ok" and facts["gpus"] == [{"name": "NVIDIA H100 80GB HBM3", "driver": "570.124.06",
                                                  "memory": "81559 MiB"}]
    assert judges.judge_nvidia_smi(6, "No devices were found\n")[0] == "failed"


# -- what a person reads -----------------------------------------------------------------------

def _summary(steps, **extra):
    return {"verdict": "no-gpu", "exit_code": 3, "device": None, "gpus": 0, "wall_s": 3.4, "timeout_s": 420.0,
            "environment": CPU, "steps": [s.as_dict() for s in steps], **extra}


def test_the_table_has_one_row_per_step_with_its_verdict_and_reason():
    steps = [gsteps.Step("doctor", "w", "ok", "exit 0", exit_code=0, wall_s=0.41),
             gsteps.Step("ddp", "w", "skipped", judges.NO_GPU),
             gsteps.Step("allreduce", "w", "failed", "did not end", exit_code=-15, wall_s=90.0, timed_out=True)]
    lines = gc.table(_summary(steps)).splitlines()
    assert lines[0] == "torchpod GPU check: no-gpu (exit 3: no CUDA device visible; every step that could run passed)"
    assert "torch 2.13.0+cu130" in lines[1] and "of --timeout-s 420" in lines[2]
    rows = {ln.split()[0]: ln.split(None, 4) for ln in lines[5:8]}
    assert rows["doctor"] == ["doctor", "ok", "0", "0.4", "exit 0"]
    assert rows["ddp"] == ["ddp", "skipped", "-", "0.0", judges.NO_GPU]
    assert rows["allreduce"][2] == "timeout"


def test_hostile_output_stays_one_row():
    reason = "line one\nline two\r\x1b[2J\x1b]0;title\x07" + "x" * 1000
    steps = [gsteps.Step("doctor", "w", "failed", reason, exit_code=1),
             gsteps.Step("plan", "w", "ok", "fine", exit_code=0)]
    text = gc.table(_summary(steps, device="GPU\nNAME\x1b[0m"))
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    body = text.splitlines()
    assert [ln.split()[0] for ln in body[5:7]] == ["doctor", "plan"] and len(body[5]) < 400


@given(st.text())
def test_one_line_is_always_one_printable_line(text):
    out = judges.one_line(text)
    assert out.isprintable() and len(out) <= judges.REASON_CAP


@pytest.mark.parametrize("name, slug", [
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"), ("NVIDIA GH200 480GB", "nvidia-gh200-480gb"),
    ("../../etc/passwd", "etc-passwd"), ("", "unknown"), (None, "unknown"), ("ＮＶＩＤＩＡ", "unknown"),
])
def test_the_device_folder_name_is_safe(name, slug):
    assert gc.device_slug(name) == slug


@given(st.text())
def test_any_device_name_gives_a_plain_folder_name(name):
    slug = gc.device_slug(name)
    assert slug and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in slug) and slug[0] != "-"


def test_the_variables_that_change_a_run_are_recorded():
    env = {"NCCL_IB_HCA": "mlx5_0", "CUDA_VISIBLE_DEVICES": "0", "HOME": "/root", "TORCHPOD_PRESET": "aws-p5",
           "NCCL_X": "a\nb"}
    assert gsteps.inherited(env) == {"CUDA_VISIBLE_DEVICES": "0", "NCCL_IB_HCA": "mlx5_0", "NCCL_X": "a b",
                                 "TORCHPOD_PRESET": "aws-p5"}


# -- the out folder and the options ------------------------------------------------------------

def test_a_new_or_empty_folder_is_taken(tmp_path):
    assert gc.check_out(str(tmp_path / "new" / "deeper")) == tmp_path / "new" / "deeper"
    (tmp_path / "empty").mkdir()
    assert gc.check_out(str(tmp_path / "empty")) == tmp_path / "empty"


def _refused(value: str) -> str:
    with pytest.raises(gc.UsageError) as info:
        gc.check_out(value)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"--out={value!r} ") and "expected a new or empty folder" in text
    return text


def test_a_file_a_full_folder_and_a_link_are_refused(tmp_path):
    (tmp_path / "file").write_text("keep me")
    assert " is a file;" in _refused(str(tmp_path / "file"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "summary.json").write_text("{}")
    assert " is a folder with 1 entries;" in _refused(str(tmp_path / "full"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    assert " is a symbolic link;" in _refused(str(tmp_path / "link"))
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert " is a symbolic link;" in _refused(str(tmp_path / "dangling"))
    os.mkfifo(tmp_path / "fifo")
    assert " is not a folder;" in _refused(str(tmp_path / "fifo"))
    assert (tmp_path / "file").read_text() == "keep me" and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("value", ["", "a\0b"])
def test_no_path_is_refused(value):
    assert "is not a path" in _refused(value)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from("\udc80\udcff/.")))
def test_any_out_value_is_a_path_or_one_line(value):
    # sys.argv holds undecodable bytes as \udc80-\udcff (surrogateescape); the check only reads
    try:
        gc.check_out(value)
    except gc.UsageError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize("text", ["29", "3601", "-60", "1e3", "٣٠٠", "60.5", "", "420\n"])
def test_a_bad_time_limit_is_one_line(text):
    with pytest.raises(gc.UsageError, match=r"^--timeout-s=.* is not a time limit; expected whole seconds from 30"):
        gc.parse_timeout(text)
    assert gc.parse_timeout("30") == 30.0 and gc.parse_timeout("3600") == 3600.0


def test_bad_options_exit_2_in_one_line_and_write_nothing(tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    for argv in (["--out", str(tmp_path / "full")], ["--out", str(tmp_path / "a"), "--timeout-s", "5"],
                 ["--out", str(tmp_path / "b"), "--python", str(tmp_path / "no-python")], ["--bogus"]):
        assert gc.main(argv, env={}) == gc.EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith("gpu_check: error: ") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


# -- the hang watch on the lent machine's torch ------------------------------------------------

VERDICT = ("torchpod: hang: no rank went past collective 2 (gloo:all_gather, sizes [[256]]) for 10 s; "
           "1 of 2 ranks wait in it (rank 0)\n"
           "torchpod: hang: culprit rank 1 on gpu-box: never entered it; last in collective 2 "
           "(gloo:all_gather, sizes [[256]]); now in /repo/examples/allreduce_check.py:34 in "
           "stall_before_the_collective\n"
           "torchpod: hang: 2 of 2 ranks reported their stacks\n")


def test_the_hang_step_needs_exit_124_and_rank_1_named_in_its_frame():
    verdict, reason, facts = judges.judge_hang(124, "torchrun noise\n" + VERDICT)
    assert verdict == "ok" and reason.startswith("culprit rank 1 on gpu-box") and len(facts["verdict"]) == 3
    assert judges.judge_hang(1, VERDICT)[0] == "failed"  # a crash is not a hang verdict
    assert judges.judge_hang(0, "")[1].startswith("exit 0, expected 124")
    assert judges.judge_hang(124, "")[0] == "failed"  # 124 from anything else (timeout(1)) says nothing
    wrong_rank = VERDICT.replace("culprit rank 1", "culprit rank 0")
    assert "does not name rank 1" in judges.judge_hang(124, wrong_rank)[1]
    assert judges.judge_hang(124, VERDICT.replace("stall_before_the_collective", "main"))[0] == "failed"


def test_the_watch_cost_is_a_ratio_of_medians_and_a_missing_arm_fails():
    verdict, reason, facts = judges.judge_watch_cost({"off": [10.0, 12.0], "on": [9.9, 11.7]})
    assert verdict == "ok" and facts["on_over_off"] == round(10.8 / 11.0, 4) and "on/off" in reason
    verdict, reason, _ = judges.judge_watch_cost({"off": [10.0, 12.0], "on": []})
    assert verdict == "failed" and "on arm" in reason
    assert judges.judge_watch_cost({"off": [0.0], "on": [1.0]})[2]["on_over_off"] is None
    failed = judges.judge_watch_cost({"off": [1.0], "on": [1.0]}, ["2 (on): exit 1"])
    assert failed[:2] == ("failed", "run 2 (on): exit 1")


def test_a_steps_log_is_read_bounded_from_either_end_with_any_bytes(tmp_path):
    log = tmp_path / "step.stdout"
    log.write_bytes(b"first \xff line\n" + b"x" * 100 + b"\nlast line\n")
    assert processes.read_head(log, cap=12) == "first \ufffd line"
    assert processes.read_tail(log, chars=10) == "last line\n"
    with open(log, "wb") as f:
        f.truncate(1 << 30)  # a sparse gigabyte: only the ends asked for are read
        f.seek(0, os.SEEK_END)
        f.write(b"the end\n")
    assert processes.read_head(log, cap=2) == "\0\0" and processes.read_tail(log, chars=8) == "the end\n"


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "is a FIFO (named pipe)"),
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
    (os.mkdir, "is a directory"),
    (lambda p: None, "cannot be read (No such file or directory)"),
])
def test_a_log_that_cannot_be_read_is_recorded_as_one_line_never_raised(tmp_path, make, says):
    log = tmp_path / "step.stderr"
    make(log)
    for read in (processes.read_head, processes.read_tail):
        text = read(log)
        assert text.startswith(f"(gpu_check: {log} ") and says in text and "\n" not in text


def test_the_process_tree_is_read_from_procfs():
    (me, started), *_ = processes.process_tree(os.getpid())
    assert me == os.getpid() and started.isdigit() and processes._alive(me, started)
    assert not processes._alive(me, started + "0") and processes._proc_stat(1 << 30) is None
