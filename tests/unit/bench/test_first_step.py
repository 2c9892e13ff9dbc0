"""bench/first_step.py: the marks read from Kubernetes' and Docker's times, cut into parts
that add up to the whole, the medians and the largest part named; its arms are the stand-in's
sandbox names as they are and in the dockershim's form."""

from __future__ import annotations

import datetime
import os

import pytest

from paths import bench_script


@pytest.fixture(scope="module")
def bench():
    return bench_script("first_step")


@pytest.mark.parametrize("text, seconds", [
    ("2026-11-29T20:41:00Z", 0.0),  # a condition's lastTransitionTime: whole seconds
    ("2026-11-29T20:41:00.925465Z", 0.925465),  # an event's eventTime (MicroTime)
    ("2026-11-29T20:41:00.925465717Z", 0.925465717),  # Docker's State.StartedAt, nanoseconds
])
def test_kubernetes_and_docker_times_are_read_to_their_last_digit(bench, text, seconds):
    whole = datetime.datetime(2026, 11, 29, 20, 41, tzinfo=datetime.timezone.utc).timestamp()
    assert bench.epoch(text) == pytest.approx(whole + seconds, abs=1e-6)


@pytest.mark.parametrize("text", ["", "yesterday", "2026-11-29 20:41:00", "2026-13-01T00:00:00Z"])
def test_a_time_in_another_form_is_refused(bench, text):
    with pytest.raises(ValueError):
        bench.epoch(text)


def test_the_parts_follow_the_marks_in_order_and_add_up_to_the_whole(bench):
    times = {"apply": 100.0, "bound": 100.2, "started": 101.0, "worker": 105.5, "imported": 108.0, "group": 108.1,
             "all-reduce": 108.15, "step": 110.0}
    parts = bench.parts(times)
    assert list(parts) == ["apply→bound", "bound→started", "started→worker", "worker→imported", "imported→group",
                           "group→all-reduce", "all-reduce→step", "whole"]
    assert parts["started→worker"] == 4.5 and parts["whole"] == 10.0
    assert sum(v for k, v in parts.items() if k != "whole") == pytest.approx(parts["whole"])


def test_the_largest_part_is_named_per_kind_arm_and_node_count(bench):
    run = {"a→b": 1.0, "b→c": 3.0, "whole": 4.0}
    results = {"jobset": {"now": {"2": [run, {"a→b": 5.0, "b→c": 1.0, "whole": 6.0}, run]},
                          "dockershim-names": {"2": [{"a→b": 9.0, "b→c": 1.0, "whole": 10.0}]}}}
    assert bench.medians(results["jobset"]["now"]["2"]) == {"a→b": 1.0, "b→c": 3.0, "whole": 4.0}  # each its own
    assert bench.largest({"jobset": {"now": {"2": [run]}}}) == {"jobset/now/2": "b→c"}
    assert bench.largest(results)["jobset/dockershim-names/2"] == "a→b"


def test_the_arms_name_the_sandbox_in_one_dns_label_or_in_the_dockershims_form(bench):
    uid = "c75f7eb7-20da-4a2a-ab6d-baf2760f1452"
    now, before = bench.ARMS["now"](uid), bench.ARMS["dockershim-names"](uid)
    assert len(now) <= 63 < len(before)
    assert before.startswith("k8s_POD_") and before.endswith(f"_{uid}_0") and uid in now


def _refused(bench, capsys, argv):
    with pytest.raises(SystemExit) as stopped:
        bench.main(argv)
    said = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and said, said
    return said[-1]


@pytest.mark.parametrize("kinds", ["runai", "slurm,pbs", "", ",", "slurm\n", "jobset;rm -rf /"])
def test_a_kind_the_bench_cannot_run_is_refused_in_one_line(bench, capsys, tmp_path, kinds):
    line = _refused(bench, capsys, ["--kinds", kinds, "--out", str(tmp_path / "out.json")])
    assert ": error: --kinds=" in line and "slurm" in line and "jobset" in line, line
    assert not (tmp_path / "out.json").exists()


def _fifo(path):
    os.mkfifo(path)


@pytest.mark.parametrize("make, why", [
    (_fifo, "expected a regular file"),
    (lambda p: p.write_bytes(b"\xff\xfe\x00binary" * 100), ""),
    (lambda p: p.write_text('{"image": "someone/else:1", "command": []}'), "measured another image"),
    (lambda p: p.write_text("[1, 2]"), "measured another image"),
    (lambda p: p.write_text(""), "is not JSON"),
])
def test_add_reads_its_earlier_file_bounded_and_refuses_what_it_did_not_write(bench, capsys, tmp_path, make, why):
    out = tmp_path / "first_step.json"
    make(out)
    before = out.stat().st_mtime_ns
    line = _refused(bench, capsys, ["--kinds", "slurm", "--add", "--out", str(out)])
    assert ": error: --" in line and why in line, line
    assert out.stat().st_mtime_ns == before  # never overwritten
