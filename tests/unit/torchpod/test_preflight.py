"""torchpod.preflight's pure parts: the pair schedule, the slow-node rule, the per-node
verdict, the JSON report and the SVG plot; hostile input next to each."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod import preflight
from torchpod.errors import InputError

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("n", range(2, 17))
def test_schedule_pairs_are_disjoint_and_cover_every_node_twice(n):
    rounds = preflight.schedule(n)
    assert len(rounds) == (1 if n == 2 else 2 if n % 2 == 0 else 3)
    for rnd in rounds:
        nodes = [node for pair in rnd for node in pair]
        assert len(nodes) == len(set(nodes)), rnd  # disjoint within a round
        assert all(0 <= node < n and a != b for a, b in rnd for node in (a, b))
    pairs = [frozenset(p) for rnd in rounds for p in rnd]
    assert len(pairs) == len(set(pairs))  # no pair measured twice
    count = {node: sum(node in p for p in pairs) for node in range(n)}
    assert all(c == (1 if n == 2 else 2) for c in count.values()), count
    if n >= 3:  # ring neighbours: every pair is (i, i+1 mod n)
        assert all((b - a) % n in (1, n - 1) for a, b in (tuple(p) for p in pairs))


@pytest.mark.parametrize("n", [0, 1, -3, 2.5, "4", None, True])
def test_schedule_refuses_fewer_than_two_nodes_or_non_integers(n):
    with pytest.raises(InputError, match="expected 2 or more nodes"):
        preflight.schedule(n)


def _pairs(n):
    return [p for rnd in preflight.schedule(n) for p in rnd]


@pytest.mark.parametrize("n", range(4, 17))
def test_one_slow_node_is_named_and_only_it(n):
    for bad in range(n):
        busbw = {p: (0.1 if bad in p else 2.0) for p in _pairs(n)}
        slow = preflight.slow_pairs(busbw)
        assert preflight.slow_nodes(_pairs(n), slow) == [bad]


def test_all_pairs_equal_names_none_and_all_slow_names_none_without_a_floor():
    for value in (1.0, 0.0):
        busbw = {p: value for p in _pairs(6)}
        assert preflight.slow_pairs(busbw) == {}
        assert preflight.slow_nodes(_pairs(6), preflight.slow_pairs(busbw)) == []


def test_a_floor_names_every_node_when_all_pairs_are_under_it():
    busbw = {p: 0.5 for p in _pairs(5)}
    slow = preflight.slow_pairs(busbw, floor=1.0)
    assert set(slow) == set(_pairs(5)) and "floor 1.000" in next(iter(slow.values()))
    assert preflight.slow_nodes(_pairs(5), slow) == [0, 1, 2, 3, 4]


def test_two_nodes_are_never_named_one_pair_cannot_say_which():
    slow = preflight.slow_pairs({(0, 1): 0.01}, floor=1.0)
    assert preflight.slow_nodes([(0, 1)], slow) == []


def test_a_node_slow_in_only_one_pair_is_not_named():
    busbw = {p: 2.0 for p in _pairs(8)}
    busbw[(2, 3)] = 0.1
    slow = preflight.slow_pairs(busbw)
    assert list(slow) == [(2, 3)] and preflight.slow_nodes(_pairs(8), slow) == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, "fast", None, True, [1.0]])
def test_non_numeric_or_non_finite_figures_are_bad_input(bad):
    busbw = {p: 1.0 for p in _pairs(4)}
    busbw[(1, 2)] = bad
    with pytest.raises(InputError, match=r"pair \(1, 2\) busbw="):
        preflight.slow_pairs(busbw)
    if bad is not None:  # None is "no floor"
        with pytest.raises(InputError, match="busbw="):
            preflight.slow_pairs({(0, 1): 1.0}, floor=bad)


@given(st.dictionaries(st.tuples(st.integers(0, 7), st.integers(0, 7)),
                       st.floats(min_value=0, max_value=1e6, allow_nan=False), max_size=12))
def test_the_rule_never_crashes_and_names_only_nodes_of_slow_pairs(busbw):
    slow = preflight.slow_pairs(busbw)
    named = preflight.slow_nodes(list(busbw), slow)
    assert all(any(n in p for p in slow) for n in named)


ROWS = [{"bytes": 1024 * 4 ** i, "count": 256 * 4 ** i, "time_us": 10.0 * (i + 1), "algbw_gbps": 0.1 * (i + 1),
         "busbw_gbps": 0.15 * (i + 1)} for i in range(5)]


def _nodes(n, fail_at=None):
    ok = {"code": "doctor.gpus.ok", "status": "ok", "detail": "fine", "fix": "", "name": "gpus"}
    bad = {"code": "fabric.user.nccl-ib-disable", "status": "fail", "detail": "NCCL_IB_DISABLE=1 on an IB node",
           "fix": "unset NCCL_IB_DISABLE", "name": "user-setting"}
    return [{"hostname": f"node{i}", "checks": [ok] + ([bad] if i == fail_at else [])} for i in range(n)]


def test_report_json_names_the_slow_node_and_the_doctor_failure_with_its_fix():
    busbw = {p: (0.05 if 3 in p else 1.5) for p in _pairs(4)}
    result = preflight.assemble(_nodes(4, fail_at=1), busbw, ROWS, "gloo", None)
    json.loads(json.dumps(result))  # plain JSON
    assert result["failing"] == [1, 3] and result["slow_nodes"] == [3]
    by_node = {v["node"]: v for v in result["nodes"]}
    assert by_node[0]["status"] == "warn" and by_node[2]["status"] == "warn"  # partners of the slow node
    assert by_node[1]["reasons"][0]["fix"] == "unset NCCL_IB_DISABLE"
    assert by_node[3]["reasons"][-1]["code"] == "preflight.slow-node"
    assert [p["pair"] for p in result["pairs"] if p["slow"]] == [[2, 3], [3, 0]]
    assert set(result["sweep"][0]) >= {"bytes", "count", "type", "redop", "time_us", "algbw_gbps", "busbw_gbps"}
    text = preflight.report(result)
    assert "node 3 (node3): fail" in text and "failing nodes: 1, 3" in text and "busbw(GB/s)" in text


def test_report_with_nothing_wrong_has_no_failing_nodes():
    result = preflight.assemble(_nodes(3), {p: 1.0 for p in _pairs(3)}, ROWS, "gloo", None)
    assert result["failing"] == [] and {v["status"] for v in result["nodes"]} == {"ok"}
    assert "failing nodes: none" in preflight.report(result)


def test_a_missing_pair_figure_is_bad_input():
    with pytest.raises(InputError, match="no figure for pairs"):
        preflight.assemble(_nodes(4), {(0, 1): 1.0}, ROWS, "gloo", None)
    with pytest.raises(InputError, match="expected 2 or more nodes"):
        preflight.assemble(_nodes(1), {}, ROWS, "gloo", None)


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
    judged = preflight.verdicts([{"hostname": "a", "checks": rows}, {"hostname": "b", "checks": rows[:1]}], [], {})
    assert [v["status"] for v in judged] == ["fail", "ok"]
    assert [r["code"] for r in judged[0]["reasons"]] == ["x.y.warn", "x.y.fail"]


# --- TORCHPOD_PREFLIGHT=1: preflight's options, then the command it execs -----------------------
def test_then_splits_preflight_options_from_the_command_exactly():
    own, then = preflight._split_then(["--iters", "2", "--then", "script", "t.py", "--then", "$(id)"])
    assert own == ["--iters", "2"] and then == ["script", "t.py", "--then", "$(id)"]
    assert preflight._split_then(["--iters", "2"]) == (["--iters", "2"], None)


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
    args = preflight._checked([])
    base = preflight.sweep_sizes(args, None, "nccl")
    assert preflight.sweep_sizes(args, _floor(), "gloo") == base
    assert preflight.sweep_sizes(args, _floor(), "nccl") == base + [1 << 30]


def test_the_report_prints_the_jobs_floor_line():
    result = preflight.assemble([{"hostname": "a"}, {"hostname": "b"}], {(0, 1): 10.0}, ROWS, "nccl", None)
    result["job"] = preflight.floor_reasons([{"bytes": 1 << 30, "busbw_gbps": 99.0}], _floor(), "p", "nccl")
    assert "job: fail preflight.floor.below: 99.0 GB/s with NCCL_ALGO=Ring < preset p" in preflight.report(result)
