"""`torchpod bench allreduce` is a workload: it runs across real containers through the
launcher, checks the reduced values and reports an nccl-tests-style sweep."""

from __future__ import annotations


def test_allreduce_bench_across_two_containers(make_cluster):
    cl = make_cluster("slurm", 2, ["bench", "allreduce", "--min-bytes", "4K", "--max-bytes", "1M",
                                   "--iters", "3", "--warmup", "1"]).start()
    codes = cl.wait(180)
    logs = cl.all_logs()
    assert codes == [0, 0], logs[-6000:]
    results = [r for r in cl.results() if r["workload"] == "allreduce_bench"]
    assert sorted(r["rank"] for r in results) == [0, 1] and all(r["ok"] for r in results), logs[-4000:]
    rows = results[0]["rows"]
    assert [r["bytes"] for r in rows] == [4096, 16384, 65536, 262144, 1048576]
    assert all(r["busbw_gbps"] > 0 and r["busbw_gbps"] == r["algbw_gbps"] for r in rows)  # 2 ranks: factor 1
    assert "busbw = algbw * 2(n-1)/n" in cl.logs(0) and "1048576" in cl.logs(0)
