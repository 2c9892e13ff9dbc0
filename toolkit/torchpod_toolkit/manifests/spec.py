"""What a user asks `invoke manifests` for, checked once. Pure.

``JobSpec`` (manifests.jobspec) holds the request; ``check(spec)`` returns it normalised or
raises one InputError naming the flag, the value and the fix. Nothing is rendered or written
before ``check`` passes, so bad input never leaves a half-written directory.

Each check sits beside the options it checks (names, placement, sitefields, pods, rendezvous,
options); :data:`STEPS` is the order they run in. The names other modules take from here
(the record, its kinds and bounds, the option table) are listed in ``__all__``.
"""

from __future__ import annotations

from typing import Callable

from . import names, placement, pods, rendezvous, sitefields
from . import options as table
from .jobspec import (
    ETCD_IMAGE,
    HPC,
    KUBE,
    MAX_NODES,
    MNNVL_KINDS,
    MNNVL_OPERATORS,
    NODE_RANGE_KINDS,
    NON_ROOT_ID,
    POD_KINDS,
    RUNTIMES,
    SCHEDULERS,
    JobSpec,
    Option,
    flag,
)
from .options import cli_options, default, given_defaults, option_text, options, parse_counts, required
from .pods import GPU_RESOURCE

__all__ = [
    "ETCD_IMAGE", "HPC", "KUBE", "MAX_NODES", "MNNVL_KINDS", "MNNVL_OPERATORS", "NODE_RANGE_KINDS", "NON_ROOT_ID",
    "POD_KINDS", "RUNTIMES", "SCHEDULERS", "GPU_RESOURCE", "JobSpec", "Option", "flag", "cli_options", "default",
    "given_defaults", "option_text", "options", "parse_counts", "required", "STEPS", "check",
]

Step = Callable[[JobSpec], JobSpec]

# The checks, in the order they run: each takes the spec and returns it, normalised where it
# normalises (counts parsed, D-HH:MM:SS in hours, tuples, the runtime and the etcd endpoint
# filled in), or raises. The order is part of the behaviour in two ways:
# - a step may rely on an earlier one: the counts are whole numbers before anything compares
#   them; check_walltime sees walltime_in_hours' form, and check_requeue a valid wall time;
#   check_binds sees the runtime check_runtime resolved; check_kind_limits a fixed size
#   from check_node_range;
# - when a spec has several faults, the first step that fails names the one the user sees.
STEPS: tuple[Step, ...] = (
    placement.check_scheduler,  # first: every later step looks the kind up
    table.check_counts,
    sitefields.walltime_in_hours,
    pods.check_pod_security,
    names.check_workload,  # the command, or preflight's options
    placement.check_node_range,
    placement.check_master_task,
    names.check_names,  # the job's fields, each in its grammar: from here ...
    names.check_image,
    sitefields.check_walltime,
    sitefields.check_queue,
    sitefields.check_site_lib,
    sitefields.check_site_fields,
    names.check_job_env,
    pods.check_pod_fields,  # ... to here
    sitefields.check_requeue,
    pods.check_ids,
    pods.check_rdma,
    placement.check_preset,
    rendezvous.check_rdzv,
    sitefields.check_runtime,
    sitefields.check_binds,
    placement.check_kind_limits,
    pods.check_memory,
    table.check_taken,  # last: every value is in its grammar before it is named
)


def check(spec: JobSpec) -> JobSpec:
    """The spec, normalised by every step of STEPS in turn; else one InputError naming the
    flag and the fix."""
    for step in STEPS:
        spec = step(spec)
    return spec
