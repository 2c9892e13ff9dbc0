"""torchpod.preflight's pure parts: the per-node verdict from torchpod.localise's rule, the
undecided verdict and how it is accepted, the JSON report, the exit code and the SVG plot;
hostile input next to each. The rule itself is tested in test_localise.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod import localise, preflight
from torchpod.errors import InputError, one_line

SVG = "{http://www.w3.org/2000/svg}"


ROWS = [{"bytes": 1024 * 4 ** i, "count": 256 * 4 ** i, "time_us": 10.0 * (i + 1), "algbw_gbps": 0.1 * (i + 1),
         "busbw_gbps": 0.15 * (i + 1)} for i in range(5)]


def _nodes(n, fail_at=None):
    ok = {"code": "doctor.gpus.ok", "status": "ok", "detail": "fine", "fix": "", "name": "gpus"}
    bad = {"code": "fabric.user.nccl-ib-disable", "status": "fail", "detail": "NCCL_IB_DISABLE=1 on an IB node",
           "fix": "unset NCCL_IB_DISABLE", "name": "user-setting"}
    return [{"hostname": f"node{i}", "checks": [ok] + ([bad] if i == fail_at else [])} for i in range(n)]


def _verdict(n, figure, floor=None):
    return localise.localise(n, lambda pairs: {p: figure(p) for p in pairs}, floor)


def test_report_json_names_the_slow_node_and_the_doctor_failure_with_its_fix():
    verdict = _verdict(4, lambda p: 0.05 if 3 in p else 1.5)
    result = preflight.assemble(_nodes(4, fail_at=1), verdict, ROWS, "gloo")
    json.loads(json.dumps(result))  # plain JSON
    assert result["failing"] == [1, 3] and result["slow_nodes"] == [3] and result["fast_nodes"] == [0, 1, 2]
    assert result["decided"] and result["undecided_nodes"] == [] and result["job"] == []
    by_node = {v["node"]: v for v in result["nodes"]}
    assert by_node[0]["status"] == "ok" and by_node[2]["status"] == "ok"  # proven fast: not blamed
    assert by_node[1]["reasons"][0]["fix"] == "unset NCCL_IB_DISABLE"
    slow = by_node[3]["reasons"][-1]
    assert slow["code"] == "preflight.slow-node"
    assert slow["detail"].startswith("under 0.375 GB/s with 3 nodes proven fast: (2, 3) 0.050 GB/s; (3, 0) 0.050")
    # the ring's pairs under the key other tools read, every round under "rounds"
    assert [p["pair"] for p in result["pairs"]] == [[0, 1], [2, 3], [1, 2], [3, 0]]
    assert [p["pair"] for p in result["pairs"] if p["slow"]] == [[2, 3], [3, 0]]
    assert [(r["round"], r["kind"], len(r["pairs"])) for r in result["rounds"]] == [(1, "first", 2), (2, "first", 2),
                                                                                  (3, "first", 2)]
    assert result["threshold_gbps"] == 0.75 and result["slow_under_gbps"] == 0.375
    assert result["rule"] == "fast at or above 0.5 x the best pair (1.500 GB/s), slow under 0.25 x"
    assert set(result["sweep"][0]) >= {"bytes", "count", "type", "redop", "time_us", "algbw_gbps", "busbw_gbps"}
    text = preflight.report(result)
    assert "node 3 (node3): fail" in text and "failing nodes: 1, 3" in text and "busbw(GB/s)" in text
    assert "round 3 (first): [0, 2] 1.500 GB/s, [1, 3] 0.050 GB/s SLOW" in text
    assert preflight.exit_code(result) == 1


def test_two_slow_nodes_of_six_as_reported_are_both_named_and_fail_the_run():
    figures = {(0, 1): 0.018, (2, 3): 0.338, (4, 5): 0.018, (1, 2): 0.018, (3, 4): 0.018, (5, 0): 0.346,
               (0, 2): 0.341, (1, 3): 0.018}
    result = preflight.assemble(_nodes(6), _verdict(6, figures.__getitem__), ROWS, "gloo")
    assert result["slow_nodes"] == [1, 4] and result["failing"] == [1, 4]
    assert "failing nodes: 1, 4" in preflight.report(result) and preflight.exit_code(result) == 1


def test_retests_are_reported_as_their_own_rounds():
    slow = {4, 5, 7}
    result = preflight.assemble(_nodes(8), _verdict(8, lambda p: 0.02 if set(p) & slow else 0.9), ROWS, "gloo")
    assert result["slow_nodes"] == [4, 5, 7] and len(result["pairs"]) == 8
    assert [r["kind"] for r in result["rounds"]] == ["first"] * 3 + ["retest"]
    assert [p["pair"] for p in result["rounds"][-1]["pairs"]] == [[4, 0], [5, 1], [6, 2], [7, 3]]
    assert "round 4 (retest): [4, 0] 0.020 GB/s SLOW, [5, 1] 0.020 GB/s SLOW, [6, 2] 0.900 GB/s" in \
        preflight.report(result)


def test_a_slow_link_warns_both_of_its_nodes_and_fails_nobody():
    result = preflight.assemble(_nodes(6), _verdict(6, lambda p: 0.05 if p == (2, 3) else 1.0), ROWS, "gloo")
    assert result["failing"] == [] and result["slow_links"] == [[2, 3]] and result["decided"]
    warned = {v["node"]: v["reasons"] for v in result["nodes"] if v["status"] == "warn"}
    assert sorted(warned) == [2, 3] and all(r[0]["code"] == "preflight.slow-pair" for r in warned.values())
    assert "failing nodes: none" in preflight.report(result) and preflight.exit_code(result) == 0


def test_report_with_nothing_wrong_has_no_failing_nodes():
    result = preflight.assemble(_nodes(3), _verdict(3, lambda p: 1.0), ROWS, "gloo")
    assert result["failing"] == [] and {v["status"] for v in result["nodes"]} == {"ok"}
    assert "failing nodes: none" in preflight.report(result) and preflight.exit_code(result) == 0


# --- undecided: said, fails unless accepted ------------------------------------------------------
def test_two_nodes_are_undecided_never_none_and_fail_unless_accepted():
    verdict = _verdict(2, lambda p: 0.7)
    result = preflight.assemble(_nodes(2), verdict, ROWS, "gloo")
    text = preflight.report(result)
    assert "failing nodes: undecided" in text and "failing nodes: none" not in text
    (job,) = result["job"]
    assert job["code"] == "preflight.undecided" and job["status"] == "fail" and "(0, 1) 0.700 GB/s" in job["detail"]
    assert "--allow-undecided" in job["fix"] and "TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED=1" in job["fix"]
    assert result["failing"] == [] and result["undecided_nodes"] == [0, 1] and preflight.exit_code(result) == 1
    assert {v["reasons"][0]["code"] for v in result["nodes"]} == {"preflight.undecided"}
    accepted = preflight.assemble(_nodes(2), verdict, ROWS, "gloo", accepted=True)
    assert accepted["job"][0]["status"] == "warn" and preflight.exit_code(accepted) == 0
    assert "failing nodes: undecided (accepted)" in preflight.report(accepted)


def test_every_pair_under_the_floor_is_undecided_naming_the_pairs():
    result = preflight.assemble(_nodes(4), _verdict(4, lambda p: 0.2, floor=1.0), ROWS, "gloo")
    assert result["rule"] == "under the floor 1 GB/s" and not result["decided"]
    assert "(0, 1) 0.200 GB/s" in result["job"][0]["detail"] and preflight.exit_code(result) == 1


def test_a_doctor_failure_is_still_named_when_the_pairs_are_undecided():
    result = preflight.assemble(_nodes(2, fail_at=1), _verdict(2, lambda p: 0.7), ROWS, "gloo", accepted=True)
    assert "failing nodes: 1" in preflight.report(result).splitlines()[-1]
    assert preflight.exit_code(result) == 1  # accepting undecided pairs does not pass a failed node


@pytest.mark.parametrize("flag, env, accepted", [
    (False, {}, False), (True, {}, True), (False, {"TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED": "1"}, True),
    (False, {"TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED": " 0 "}, False),
    (True, {"TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED": "0"}, True),
])
def test_accepting_undecided_by_option_or_setting(flag, env, accepted):
    assert preflight.allow_undecided(flag, env) is accepted


@pytest.mark.parametrize("value", ["yes", "true", "2", "\u0661", "1\n; rm -rf /", "x" * 500])
def test_a_bad_accept_setting_is_one_line_naming_it(value, monkeypatch, capsys):
    with pytest.raises(InputError, match="TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED=.* is not a switch; expected 1"):
        preflight.allow_undecided(True, {"TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED": value})
    monkeypatch.setenv("TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED", value)
    assert preflight.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED" in err[0]


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_any_setting_value_is_accepted_refused_or_bad_input_in_one_line(value):
    try:
        accepted = preflight.allow_undecided(False, {"TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED": value})
    except InputError as exc:
        assert value.strip() not in ("", "0", "1") and "\n" not in one_line(exc)
    else:
        assert accepted is (value.strip() == "1")


def test_a_node_count_other_than_the_pairs_is_bad_input():
    with pytest.raises(InputError, match="preflight has 3 nodes but the pairs were measured for 4"):
        preflight.assemble(_nodes(3), _verdict(4, lambda p: 1.0), ROWS, "gloo")


def test_svg_parses_and_has_one_polyline_per_run_with_a_point_per_row():
    hostile = 'run <&> "\x1b"'
    text = preflight.svg([("4 nodes", ROWS), (hostile, ROWS[:3])])
    root = ET.fromstring(text)
    lines = root.findall(f"{SVG}polyline")
    assert [len(line.get("points", "").split()) for line in lines] == [5, 3]
    assert [line.find(f"{SVG}title").text for line in lines] == ["4 nodes", 'run <&> "\\x1b"']
    xs = [float(pt.split(",")[0]) for pt in lines[0].get("points", "").split()]
    assert xs == sorted(xs) and len(set(xs)) == 5  # size grows left to right


def test_svg_of_nothing_is_bad_input_and_one_point_still_draws():
    with pytest.raises(InputError, match="no rows to plot"):
        preflight.svg([])
    root = ET.fromstring(preflight.svg([("one", ROWS[:1])]))
    assert len(root.findall(f"{SVG}polyline")) == 1


@pytest.mark.parametrize("argv", [["--iters", "0"], ["--floor-gbps", "nan"], ["--floor-gbps", "-1"],
                                  ["--pair-bytes", "lots"], ["--min-bytes", "8M", "--max-bytes", "1M"],
                                  ["--iters", "\u0663"], ["--floor-gbps", "\u0661\u0662"], ["--bogus"]])
def test_bad_options_exit_2_with_one_line(argv, capsys):
    assert preflight.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("torchpod: error: torchpod preflight: ")


def test_outside_torchrun_it_says_how_to_start_it(monkeypatch, capsys):
    monkeypatch.delenv("RANK", raising=False)
    assert preflight.main([]) == 2
    assert "torchpod run -m torchpod.preflight" in capsys.readouterr().err


def test_the_doctors_own_rows_decide_the_node_status():
    from torchpod.doctor import Check
    from torchpod.fabric.findings import Finding, Severity

    rows = [Check(f"c{i}", Finding(f"x.y.{s.value}", s, "why", "how")).as_dict() for i, s in enumerate(Severity)]
    verdict = localise.localise(2, lambda pairs: {p: 1.0 for p in pairs}, floor=0.5)
    judged = preflight.verdicts([{"hostname": "a", "checks": rows}, {"hostname": "b", "checks": rows[:1]}], verdict)
    assert [v["status"] for v in judged] == ["fail", "ok"]
    assert [r["code"] for r in judged[0]["reasons"]] == ["x.y.warn", "x.y.fail"]


# --- TORCHPOD_PREFLIGHT=1: preflight's options, then the command it execs -----------------------
@pytest.mark.parametrize("argv", [["--then"], ["--then", "script"], ["--then", "shell", "id"], ["--then", "", "x"]])
def test_a_malformed_then_is_bad_input_in_one_line(argv, capsys):
    assert preflight.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("torchpod: error: preflight --then")


@pytest.mark.parametrize("then, env, argv", [
    (["script", "t.py", "a b"], {}, ["PY", "-u", "t.py", "a b"]),
    (["module", "pkg.m", "-x"], {}, ["PY", "-u", "-m", "pkg.m", "-x"]),
    (["program", "/bin/trainer", "$HOME"], {}, ["/bin/trainer", "$HOME"]),
    (["script", "t.py"], {"PYTHON_EXEC": "/opt/py"}, ["/opt/py", "-u", "t.py"]),
])
def test_the_command_is_execd_as_torchrun_starts_it_with_the_jobs_environment(then, env, argv, monkeypatch):
    seen = []
    monkeypatch.setattr(preflight.sys, "executable", "PY")
    monkeypatch.setattr(preflight.os, "execvpe", lambda file, args, environ: seen.append((file, args, environ)))
    job_env = {"RANK": "3", "NCCL_ALGO": "Tree", **env}
    preflight.exec_then(then, job_env)
    assert seen == [(argv[0], argv, job_env)]


def test_a_command_that_cannot_start_is_one_line_and_exit_1(tmp_path, capsys):
    missing = str(tmp_path / "no-such-trainer")
    assert preflight.exec_then(["program", missing], {"PATH": str(tmp_path)}) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "preflight passed but" in err[0] and "could not start" in err[0]


# --- a preset's floor: the job's all-reduce at the floor's size ---------------------------------
def _floor(algo="Ring"):
    from torchpod.fabric.presets import Floor

    return Floor(busbw_gbps=185.0, bytes=1 << 30, nodes=2, algo=algo, basis="b", source="src")


def _sweep(busbw):
    return [{"bytes": 1024, "busbw_gbps": 0.1}, {"bytes": 1 << 30, "busbw_gbps": busbw}]


@pytest.mark.parametrize("busbw, algo, status", [
    (190.0, "Ring", "ok"), (185.0, "Ring", "ok"), (120.0, "Ring", "fail"), (120.0, "NCCL's choice", "warn"),
])
def test_the_job_is_judged_against_its_presets_floor(busbw, algo, status):
    (reason,) = preflight.floor_reasons(_sweep(busbw), _floor(algo), "oci-bm-gpu-b4.8", "nccl")
    assert reason["status"] == status and "preset oci-bm-gpu-b4.8: 185 GB/s" in reason["detail"]
    assert ("src" in reason["detail"]) and (bool(reason["fix"]) == (status != "ok"))


def test_no_floor_no_reason_and_gloo_is_not_judged():
    assert preflight.floor_reasons(_sweep(1.0), None, "", "nccl") == []
    (reason,) = preflight.floor_reasons(_sweep(1.0), _floor(), "p", "gloo")
    assert reason["status"] == "info" and "not judged" in reason["detail"]


@pytest.mark.parametrize("sweep", [[], [{"bytes": 1 << 30, "busbw_gbps": float("nan")}],
                                   [{"bytes": 1 << 30, "busbw_gbps": "fast"}]])
def test_a_sweep_without_a_number_at_the_floor_is_bad_input(sweep):
    with pytest.raises(InputError):
        preflight.floor_reasons(sweep, _floor(), "p", "nccl")


def test_the_sweep_adds_the_floors_size_on_nccl_only():
    args = preflight.check_options([])
    base = preflight.sweep_sizes(args, None, "nccl")
    assert preflight.sweep_sizes(args, _floor(), "gloo") == base
    assert preflight.sweep_sizes(args, _floor(), "nccl") == base + [1 << 30]


def test_the_report_prints_the_jobs_floor_line():
    verdict = localise.localise(2, lambda pairs: {p: 10.0 for p in pairs}, floor=5.0)
    result = preflight.assemble([{"hostname": "a"}, {"hostname": "b"}], verdict, ROWS, "nccl")
    result["job"] = preflight.floor_reasons([{"bytes": 1 << 30, "busbw_gbps": 99.0}], _floor(), "p", "nccl")
    assert "job: fail preflight.floor.below: 99.0 GB/s with NCCL_ALGO=Ring < preset p" in preflight.report(result)


def _rank(rank, node, group, local=0):
    return {"rank": rank, "node": node, "group_rank": group, "local": local, "hostname": f"c{node + 1}"}


def test_nodes_are_named_as_the_plan_named_them_where_torch_ranked_them_by_topology():
    # four nodes under two switches: torch's group ranks 0..3 went to plan nodes 0, 2, 1, 3
    ranks = [_rank(0, 0, 0), _rank(1, 2, 1), _rank(2, 1, 2), _rank(3, 3, 3), _rank(4, 2, 1, local=1)]
    heads = preflight.node_heads(ranks)
    assert [(h["node"], h["group_rank"], h["rank"]) for h in heads] == [(0, 0, 0), (1, 2, 2), (2, 1, 1), (3, 3, 3)]
    result = preflight.assemble(heads, _verdict(4, lambda p: 1.5), ROWS, "gloo")
    text = preflight.report(result)
    assert "node 1 (c2, group rank 2): ok" in text and "node 0 (c1): ok" in text


@pytest.mark.parametrize("nodes", [[0, 0, 1], [5, 6, 7], [0, 1, 3]])
def test_plan_numbers_that_are_not_one_each_fall_back_to_torchs_group_rank(nodes):
    heads = preflight.node_heads([_rank(i, node, i) for i, node in enumerate(nodes)])
    assert [h["node"] for h in heads] == [0, 1, 2]


@pytest.mark.parametrize("value, number", [("3", 3), ("", 7), ("x", 7), ("-1", 7), ("١", 7), ("9" * 12, 7)])
def test_the_plans_node_number_is_read_strictly(value, number):
    assert preflight._node_number({"TORCHPOD_NODE_RANK": value}, 7) == number
