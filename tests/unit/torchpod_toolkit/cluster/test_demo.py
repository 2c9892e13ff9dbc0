"""torchpod_toolkit.cluster.demo: `invoke demo`'s closing summary, from the results the ranks
printed (the demo itself runs containers: tests/cluster)."""

from __future__ import annotations

from torchpod_toolkit.cluster import topology


def test_demo_summary_names_the_group_for_every_workload():
    from torchpod_toolkit.cluster.demo import summary_lines

    topo = topology.build("slurm", 2, "demo-1")
    bench = [{"workload": "allreduce_bench", "rank": r, "world_size": 2, "backend": "gloo", "peak_busbw_gbps": 1.0}
             for r in (0, 1)]
    assert summary_lines(bench, 2, topo, 0.0) == [
        "nodes 2, world size 2, scheduler slurm (detected as slurm)",
        "all-reduce peak busbw 1.000 GB/s (gloo, 2 ranks); the table is in node 0's output"]
    train = [{"workload": "ddp_resnet", "rank": r, "world_size": 2, "t_first_allreduce": 104.4} for r in (0, 1)]
    assert summary_lines(train, 2, topo, 100.0) == [
        "nodes 2, world size 2, scheduler slurm (detected as slurm), first all-reduce after 4.4 s"]
    assert summary_lines([], 2, topo, 0.0) == ["nodes 2: no rank reported a result"]
