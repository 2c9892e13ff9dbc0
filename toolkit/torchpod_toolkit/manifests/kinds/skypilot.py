"""SkyPilot: a task YAML. SkyPilot runs the image itself (image_id docker:), so torchpod is in
the task's environment and the only runtime is none; the task has no queue and no wall time."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT

from .record import JobKind, Nodes, Ref

# What SkyPilot hands each node (skypilot-org/skypilot 0.14.1, sky/backends/task_codegen.py):
# every node's IP, one a line, head first, its rank, the GPU count; nodes named head,
# worker1.. as SkyPilot's logs name them.
NODES = Nodes("{name}-worker{i}", (
    ("SKYPILOT_NODE_IPS", "{ips}"), ("SKYPILOT_NODE_RANK", "{i}"), ("SKYPILOT_NUM_NODES", "{nodes}"),
    ("SKYPILOT_NUM_GPUS_PER_NODE", "{gpus}"), ("SKYPILOT_TASK_ID", "sky-2026-01-01-00-00-00-000000_{name}_{number}"),
), first_host="{name}-head")

KIND = JobKind("skypilot", "skypilot", RDZV_PORT_DEFAULT, "skypilot", None, None, "sky launch", "yaml",
               Ref("hpc", "skypilot_file"), fan_out="`run` starts on every node, in the image; GPU type H100 unless "
                                       "--gpu-model names another", runtimes=("none",), nodes=NODES, gpu_model=True,
               restarts="none: `sky launch` runs the task once, and its exit status is the job's",
               watch="sky queue {name}",
               submit_flags="--yes --cluster {name}",
               order=130)
