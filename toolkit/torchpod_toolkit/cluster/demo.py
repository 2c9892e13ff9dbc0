"""`invoke demo`: one job of N containers under a scheduler, output streamed per node,
then a summary table. Checks its input first and cleans up on every exit path.

The summary's "first all-reduce" is seconds from the job's start (network and containers
created) to the last rank's first completed all-reduce: container start, imports, the
launcher, rendezvous and process-group setup together.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass, replace

import yaml

from torchpod import readers
from torchpod.contract import ENV_RDZV_TIMEOUT, PREFLIGHT_MODULE
from torchpod.errors import InputError

from ..manifests import jobs
from . import runner, scenarios, topology
from .nodes import Topology

# Resident memory one node needs on a CPU host: torchpod + the torchrun agent (~0.4 GiB)
# and one worker with the CUDA build of torch imported (~0.6 GiB), with headroom.
NODE_MEMORY_BYTES = int(1.5 * 2**30)

# What each node's `torchpod` is given (the image's ENTRYPOINT): an example script, or a
# launcher subcommand for workloads that ship in the launcher itself.
WORKLOADS = {
    "ddp_resnet": [f"{runner.EXAMPLES}/ddp_resnet.py", "--steps", "20"],
    "allreduce_check": [f"{runner.EXAMPLES}/allreduce_check.py"],
    "snapshot_trainer": [f"{runner.EXAMPLES}/snapshot_trainer.py", "5", "1", "--snapshot-path", "/tmp/snapshot.pt"],
    "message_passing": [f"{runner.EXAMPLES}/message_passing.py"],
    "allreduce-bench": ["bench", "allreduce", "--max-bytes", "64M"],
    # names the slow nodes; exit 1 when one fails (docs/launcher.md). The demo's default two
    # containers cannot be told apart without a floor: the verdict says so and the demo goes on.
    "preflight": ["-m", PREFLIGHT_MODULE, "--allow-undecided"],
}


@dataclass(frozen=True)
class DemoRequest:
    scheduler: str
    nodes: int
    workload: str
    image: str
    timeout: float = 600.0
    gpus: bool = False
    manifest: str = ""  # a rendered Kubernetes manifest: run the pods its operator would create


MANIFEST_CAP = 4 << 20  # a rendered manifest is kilobytes


def load_manifest(path: str) -> Topology:
    """The pods of a rendered manifest, as the operator model says they are created."""
    text = readers.read_text(path, what=f"--manifest={path!r}", expected="a file `invoke manifests` wrote",
                             cap=MANIFEST_CAP)
    try:
        docs = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as exc:
        raise InputError(f"--manifest={path!r} cannot be read as YAML ({exc}); "
                         "expected a file `invoke manifests` wrote") from None
    return topology.from_manifest(docs)


def _more_nodes() -> str:
    """`` (K: 2 or more)``: the scenarios whose kind needs more than one node (JobKind.min_nodes)."""
    more = [f"{k.scenario}: {k.min_nodes} or more" for k in jobs.KINDS if k.min_nodes > 1]
    return f" ({', '.join(more)})" if more else ""


def check(req: DemoRequest, mem_total: int) -> None:
    """Bad input as one InputError: unknown scheduler/workload, too many nodes for memory."""
    if req.manifest:
        pass
    elif req.scheduler not in scenarios.SCENARIOS:
        raise InputError(f"--scheduler={req.scheduler!r} is unknown; expected one of "
                         f"{', '.join(scenarios.SCENARIOS)}")
    if not req.manifest and req.workload not in WORKLOADS:
        raise InputError(f"--workload={req.workload!r} is unknown; expected one of {', '.join(WORKLOADS)}")
    fewest = next((k.min_nodes for k in jobs.KINDS if k.scenario == req.scheduler), 1)
    if req.nodes < max(1, fewest):
        raise InputError(f"--nodes={req.nodes}; expected 1 or more{_more_nodes()}")
    fits = max(0, mem_total // NODE_MEMORY_BYTES)
    if req.nodes > fits:
        raise InputError(
            f"--nodes={req.nodes} needs about {req.nodes * NODE_MEMORY_BYTES / 2**30:.1f} GiB but the "
            f"Docker engine has {mem_total / 2**30:.1f} GiB; expected --nodes {fits} or fewer"
        )


def command(workload: str) -> list[str]:
    return list(WORKLOADS[workload])


def summarize(cl: runner.Cluster, t0: float) -> str:
    results = cl.results()
    rows = [("node", "hostname", "ranks", "first all-reduce s", "steps/s", "final loss", "exit")]
    for run in cl.nodes:
        mine = [r for r in cl.results(run.node.index)]
        ranks = ",".join(str(r["rank"]) for r in sorted(mine, key=lambda r: r["rank"])) or "-"
        first = max((r["t_first_allreduce"] for r in mine if "t_first_allreduce" in r), default=None)
        sps = [r["steps_per_s"] for r in mine if r.get("steps_per_s")]
        loss = [r["final_loss"] for r in mine if r.get("final_loss") is not None]
        rows.append((str(run.node.index), run.node.hostname, ranks,
                     f"{first - t0:.1f}" if first else "-",
                     f"{sum(sps) / len(sps):.2f}" if sps else "-",
                     f"{sum(loss) / len(loss):.4f}" if loss else "-",
                     "timeout" if run.timed_out else str(run.exit_code)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += ["", *summary_lines(results, len(cl.nodes), cl.topology, t0)]
    return "\n".join(lines)


def summary_lines(results: list[dict], nodes: int, topo: Topology, t0: float) -> list[str]:
    """The closing lines: group size and scheduler, the first all-reduce, a bench's peak."""
    if not results:
        return [f"nodes {nodes}: no rank reported a result"]
    world = ",".join(map(str, sorted({r["world_size"] for r in results})))
    line = f"nodes {nodes}, world size {world}, scheduler {topo.scenario} (detected as {topo.scheduler})"
    firsts = [r["t_first_allreduce"] for r in results if "t_first_allreduce" in r]
    if firsts:
        line += f", first all-reduce after {max(firsts) - t0:.1f} s"
    out = [line]
    bench = [r for r in results if r.get("workload") == "allreduce_bench" and r.get("rank") == 0]
    if bench:
        out.append(f"all-reduce peak busbw {bench[0]['peak_busbw_gbps']:.3f} GB/s ({bench[0]['backend']}, "
                   f"{bench[0]['world_size']} ranks); the table is in node 0's output")
    return out


def run(client, req: DemoRequest, out=sys.stdout) -> int:
    """Run the demo job; returns 0 when every node exited 0."""
    mem_total = int(client.info().get("MemTotal", 0))
    manifest_topo = load_manifest(req.manifest) if req.manifest else None
    if manifest_topo is not None:
        req = replace(req, nodes=len(manifest_topo.nodes))
    check(req, mem_total)
    runner.image_or_error(client, req.image)
    job = f"demo-{uuid.uuid4().hex[:4]}"
    topo = manifest_topo or topology.build(req.scheduler, req.nodes, job)
    width = max(len(n.hostname) for n in topo.nodes)

    def line(node, text):
        out.write(f"{node.hostname:>{width}} | {text}\n")
        out.flush()

    labels = {"torchpod.demo": job}
    env = {"PYTHONUNBUFFERED": "1", ENV_RDZV_TIMEOUT.name: "120"}
    if not req.gpus:
        env["OMP_NUM_THREADS"] = "1"
    workload = [] if req.manifest else command(req.workload)  # a manifest's pods carry their own args
    cl = runner.Cluster(client, req.image, topo, workload, labels, env=env,
                        on_line=line, gpus=req.gpus)
    t0 = time.time()
    try:
        cl.start()
        codes = cl.wait(req.timeout)
        out.write("\n" + summarize(cl, t0) + "\n")
        return 0 if codes and all(c == 0 for c in codes) else 1
    finally:
        cl.close()
        runner.sweep(client, "torchpod.demo", job)
