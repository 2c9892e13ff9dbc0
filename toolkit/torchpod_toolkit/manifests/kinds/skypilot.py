"""SkyPilot: a task YAML. SkyPilot runs the image itself (image_id docker:), so torchpod is in
the task's environment and the only runtime is none; the task has no queue and no wall time."""

from __future__ import annotations

from torchpod.contract import RDZV_PORT_DEFAULT

from .record import JobKind

KIND = JobKind("skypilot", "skypilot", RDZV_PORT_DEFAULT, "skypilot", None, None, "sky launch", "yaml",
               "skypilot_file", fan_out="`run` starts on every node, in the image; GPU type H100 unless "
                                       "--gpu-model names another", runtimes=("none",), gpu_model=True,
               restarts="none: `sky launch` runs the task once, and its exit status is the job's",
               watch="sky queue {name}",
               submit_flags="--yes --cluster {name}",
               order=130)
