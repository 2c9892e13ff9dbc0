"""Amazon SageMaker training jobs: one container per instance, named ``algo-1``..``algo-N``.

SageMaker gives every container SM_HOSTS (a JSON list of the job's container names),
SM_CURRENT_HOST (this container's name) and SM_NUM_GPUS (this instance's GPUs); all three
are per node, none per process (aws/sagemaker-training-toolkit,
src/sagemaker_training/environment.py, from /opt/ml/input/config/resourceconfig.json's
``hosts`` and ``current_host``). SageMaker writes ``hosts`` "sorted lexicographically"
(environment.py, ``read_resource_config``) and the toolkit keeps that order: the master is
``list(hosts)[0]`` (environment.py, ``_master_hostname``) and a host's rank is
``hosts.index(current_host)`` (pytorch_xla.py, ``PyTorchXLARunner``). So the first host,
``algo-1``, is node 0 and holds the rendezvous here too, at torchpod's port; the order is
taken as given, never re-sorted (``algo-10`` before ``algo-2`` is SageMaker's order too).

SM_* are exported by the toolkit, not by the platform: a container whose entrypoint is
torchpod itself sees only /opt/ml/input/config/resourceconfig.json. With
TORCHPOD_SCHEDULER=sagemaker and no SM_HOSTS, that file is read (through torchpod.readers,
capped) for ``hosts`` and ``current_host``.
"""

from __future__ import annotations

import json

from .. import readers
from ..errors import InputError
from ..options import UserOptions
from ..words import plural
from .common import Detection, Endpoint, Env, Facts, NodeCount, check_host, get, parse_int, rdzv_port, stable_id

NAME = "sagemaker"
STRONG = True  # SM_HOSTS / SM_CURRENT_HOST are set by SageMaker's agent alone
MARKERS = ("SM_HOSTS", "SM_CURRENT_HOST")

HOSTS_EXPECTED = 'a JSON list of host names, e.g. ["algo-1","algo-2"], as SageMaker sets it'


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


def parse_hosts(value: str, what: str = "SM_HOSTS") -> tuple[str, ...]:
    """SM_HOSTS as a tuple of distinct checked host names, or one InputError."""
    try:
        hosts = json.loads(value)
    except (ValueError, RecursionError):
        hosts = None
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        raise InputError(f"{what}={value!r} is not a JSON list of host names; expected {HOSTS_EXPECTED}")
    checked = tuple(check_host(what, h) for h in hosts)
    if len(set(checked)) != len(checked):
        raise InputError(f"{what}={value!r} names a host twice; expected {HOSTS_EXPECTED}, each once")
    return checked


RESOURCE_CONFIG = "opt/ml/input/config/resourceconfig.json"
CONFIG_EXPECTED = ('the JSON file SageMaker writes for the job, with "hosts" (a list of host names) '
                   'and "current_host"; run inside a SageMaker training job')


def read_resource_config(facts: Facts) -> tuple[tuple[str, str], tuple[str, str]]:
    """("SM_HOSTS"-like (what, JSON list), (what, current host)) from resourceconfig.json."""
    path = facts.root / RESOURCE_CONFIG
    what = str(path)
    text = readers.read_text(path, what=what, expected=CONFIG_EXPECTED, cap=readers.DATA_CAP)
    try:
        config = json.loads(text)
    except (ValueError, RecursionError):
        config = None
    hosts = config.get("hosts") if isinstance(config, dict) else None
    current = config.get("current_host") if isinstance(config, dict) else None
    if not isinstance(current, str) or not isinstance(hosts, list):
        raise InputError(f"{what} is not a JSON object with hosts and current_host; expected {CONFIG_EXPECTED}")
    return (what + " hosts", json.dumps(hosts)), (what + " current_host", current)


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    raw, current = get(env, "SM_HOSTS"), get(env, "SM_CURRENT_HOST")
    if raw is None and current is None:
        raw, current = read_resource_config(facts)  # forced: TORCHPOD_SCHEDULER=sagemaker
    if raw is None or current is None:
        seen = "SM_HOSTS" if raw is not None else "SM_CURRENT_HOST"
        raise InputError(
            f"{seen} is set but SM_HOSTS or SM_CURRENT_HOST is missing; expected both "
            f"({HOSTS_EXPECTED}, and this container's name in it); run inside a SageMaker training job"
        )
    hosts = parse_hosts(raw[1], raw[0])
    if current[1] not in hosts:
        raise InputError(
            f"{current[0]}={current[1]!r} is not in {raw[0]}={raw[1]!r}; expected one of "
            f"{', '.join(hosts[:8])}; both come from the same training job's resourceconfig.json"
        )
    index = hosts.index(current[1])
    notes = [f"{plural(len(hosts), 'host')} in {raw[0]}; this is {current[1]!r}, node {index} ({current[0]}); "
             f"{hosts[0]!r} holds the rendezvous"]
    nproc = None
    gpus = get(env, "SM_NUM_GPUS")
    count = None if gpus is None else parse_int(*gpus, hint="this instance's GPU count")
    if count:  # a CPU instance says 0: leave the count to the GPUs found or the user
        nproc = str(count)
        notes.append(f"nproc_per_node {nproc} from SM_NUM_GPUS")
    port, port_notes = rdzv_port(env)
    job = get(env, "TRAINING_JOB_NAME")
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(len(hosts)),
        node_rank=index,
        rdzv_endpoint=Endpoint(hosts[0], port),
        rdzv_id=stable_id("sagemaker", job[1] if job else ",".join(hosts)),
        hosts=hosts,
        local_addr=hosts[index],
        nproc_per_node=nproc,
        notes=tuple(notes) + port_notes,
    )
