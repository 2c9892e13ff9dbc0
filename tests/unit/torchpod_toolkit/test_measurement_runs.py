"""torchpod_toolkit.measurement_runs: the rows of the benches that run jobs, the launcher and
the test harness show the JSON's figures, and a result file that is not what the bench writes
is one line."""

from __future__ import annotations

import copy

import pytest

from torchpod_toolkit import measurements as m

from measurement_cases import REAL, spoiled_message


def test_figures_come_from_the_json_not_from_the_renderer():
    results = copy.deepcopy(REAL)
    results["slurm.json"]["median_s"] = {"sbatch": 6.0, "harness": 3.0}
    assert "6.00 / 3.00 s = **2.00**" in m.render(results)
    assert "6.00 / 3.00 s = **2.00**" not in m.render(REAL)


@pytest.mark.parametrize("name, key, value, needle", [
    ("rendezvous.json", "summary", [], "summary=[]; expected a non-empty list"),
    ("rendezvous.json", "runs.0", "x", "runs.0='x'; expected a mapping"),
    ("rendezvous.json", "runs.0.seconds", None, "runs.0.seconds=None; expected a positive number"),
    ("allreduce.json", "median", {}, "median.busbw_gbps is missing"),
    ("allreduce.json", "runs.0.rows.0.bytes", 1e3, "runs.0.rows.0.bytes=1000.0; expected a positive integer"),
    ("slurm.json", "rows", [{"how": "harness", "seconds": 3.0}], "expected at least one row with how='sbatch'"),
    ("hostile_reads.json", "rows.4.old", {"cpu_s": None}, "rows.4.old.note is missing"),
    ("preflight.json", "rows.2.slow_nodes", [4, "5 | x"], "rows.2.slow_nodes=[4, '5 | x']; expected node indices"),
    ("preflight.json", "rows.2.slow_nodes", [4, 8], "expected node indices from 0 to 7"),
    ("preflight.json", "rows.2.slow_median_s", -1, "rows.2.slow_median_s=-1; expected a positive number"),
    ("hostile_reads.json", "rows.0.new.peak_rss_mib", "x" * 500, "rows.0.new.peak_rss_mib='xxxxx"),
    ("first_step.json", "marks", ["step | x"], "marks=['step | x']; expected mark names"),
    ("first_step.json", "arms", [], "arms=[]; expected a non-empty list"),
    ("first_step.json", "nodes", None, "nodes=None; expected a non-empty list"),
    ("first_step.json", "nodes.1", "4\n| x", "nodes.1='4\\n| x'; expected a positive integer"),
    ("first_step.json", "medians.jobset", {"other": {}}, "expected results of the arms"),
    ("first_step.json", "medians.jobset.now.2.whole", 0, "medians.jobset.now.2.whole=0; expected a positive number"),
    ("first_step.json", "medians.jobset.now.2.worker→imported", -1.5, "expected seconds, 0 or more"),
    ("first_step.json", "medians.jobset.now.2.bound→started", float("nan"), "expected seconds, 0 or more"),
    ("rendezvous_cost.json", "rows.0.poll_cores", -1, "rows.0.poll_cores=-1; expected a positive number"),
    ("rendezvous_cost.json", "rows.1.nodes", "1024 | x", "rows.1.nodes='1024 | x'; expected a positive integer"),
    ("rendezvous_cost.json", "machine", {}, "machine.cpus is missing"),
    ("render_walk.json", "median.after.room_returns", -1, "median.after.room_returns=-1; expected a count, 0 or more"),
    ("render_walk.json", "median.before.room_visits", True, "expected a count, 0 or more"),
    ("render_walk.json", "median.before", {}, "median.before.room_returns is missing"),
    ("render_walk.json", "kinds", {}, "kinds={}; expected a non-empty mapping"),
    ("render_walk.json", "before", "f5126ff | x", "before='f5126ff | x'; expected 1-120 characters"),
])
def test_a_result_that_is_not_what_the_bench_writes_is_one_line(name, key, value, needle):
    assert needle in spoiled_message(name, key, value)


def test_the_walk_row_shows_both_sides_and_a_count_of_zero():
    results = copy.deepcopy(REAL)
    results["render_walk.json"]["median"] = {"before": {"room_returns": 5, "room_visits": 7, "module_returns": 228},
                                             "after": {"room_returns": 0, "room_visits": 2, "module_returns": 345.5}}
    table = m.render(results)
    assert "room returns **5 → 0**" in table and "room visits 7 → 2" in table and "module returns 228 → 345.5" in table
