"""torchpod_toolkit.cluster.demo: `invoke demo`'s closing summary, from the results the ranks
printed (the demo itself runs containers: tests/cluster)."""

from __future__ import annotations

import os

import pytest

from torchpod.errors import InputError
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


def _manifest(tmp_path):
    from torchpod_toolkit.manifests.render import render
    from torchpod_toolkit.manifests.spec import JobSpec

    (out,) = [o for o in render(JobSpec("trainer", 2, "registry.example.com/torchpod/pytorch:2.13.0", ("train.py",),
                                        gpus_per_node=0)) if o.name.endswith(".yaml")]
    path = tmp_path / out.name
    path.write_text(out.text)
    return path


def test_a_manifest_is_read_through_the_bounded_reader(tmp_path):
    from torchpod_toolkit.cluster.demo import load_manifest

    assert len(load_manifest(str(_manifest(tmp_path))).nodes) == 2


def test_a_manifest_of_a_shape_no_operator_recording_holds_is_one_line(tmp_path):
    """`invoke demo --manifest` of a job its operator's recordings cannot speak for (a
    TrainJob whose process count per node is left to the torch plugin's "auto") is refused,
    never modelled by guess."""
    import yaml

    from torchpod_toolkit.cluster.demo import load_manifest

    path = _manifest(tmp_path)
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    del docs[-1]["spec"]["trainer"]["numProcPerNode"]
    path.write_text(yaml.safe_dump_all(docs))
    with pytest.raises(InputError) as info:
        load_manifest(str(path))
    assert str(info.value) == ("trainer.numProcPerNode is not set; expected a whole number (a job without it "
                               "was never recorded)")


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "is a FIFO (named pipe); expected a regular file"),
    (lambda p: os.symlink("/dev/zero", p), "is a character device"),
    (lambda p: p.write_bytes(b"kind: \xff\n"), "not UTF-8 text (first at byte 6)"),
    (lambda p: p.write_bytes(b"#" * ((4 << 20) + 1)), "over the 4 MiB cap"),
    (lambda p: p.write_text("a: [\n"), "cannot be read as YAML"),
    (lambda p: None, "cannot be read (No such file or directory)"),
])
def test_a_manifest_that_is_no_small_yaml_file_is_one_line_never_a_wait(tmp_path, make, says):
    from torchpod_toolkit.cluster.demo import load_manifest

    path = tmp_path / "job.yaml"
    make(path)
    with pytest.raises(InputError) as info:
        load_manifest(str(path))
    assert str(info.value).startswith(f"--manifest={str(path)!r}") and says in str(info.value)
