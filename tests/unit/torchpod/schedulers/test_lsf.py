"""torchpod.schedulers.lsf: IBM LSF (LSB_JOBID, LSB_DJOB_HOSTFILE, LSB_DJOB_RANKFILE, LSB_MCPU_HOSTS).
The checks every detector runs (launcher_cases.DetectorCases) take this file's table of cases."""

from __future__ import annotations

import pytest

from torchpod.schedulers import lsf

from launcher_cases import ForwardedDetectorCases, user_options


class TestLsf(ForwardedDetectorCases):
    detector = lsf
    prefixes = ('LSB_', 'JSM_')
    claims = [
        {'LSB_JOBID': '9'},
        {'LSB_DJOB_HOSTFILE': '/tmp/h'},
        {'LSB_DJOB_RANKFILE': '/tmp/r'},
        {'LSB_MCPU_HOSTS': 'n1 4'},
    ]
    not_claims = [
        {},
        {'JSM_NAMESPACE_LOCAL_RANK': '0'},
        {'LSF_ENVDIR': '/etc/lsf'},
    ]


# Slot shapes (IBM LSF 10.1, "Environment variables set for job execution": the host file
# lists a host once per slot, LSB_MCPU_HOSTS pairs each host with its slots). Each happy
# shape is given both ways, as a host file and as LSB_MCPU_HOSTS: (pairs, this host, the
# compute hosts planned).
_EVEN_SHAPES = [
    ([("gpu01", 1), ("gpu02", 1), ("gpu03", 1)], "gpu03", ["gpu01", "gpu02", "gpu03"]),  # span[ptile=1]
    ([("gpu01", 8), ("gpu02", 8)], "gpu02", ["gpu01", "gpu02"]),  # span[ptile=8]
    ([("gpu01", 4)], "gpu01", ["gpu01"]),
    ([("batch1", 1), ("gpu01", 4), ("gpu02", 4)], "gpu02", ["gpu01", "gpu02"]),  # launch host first
]
# the shapes refused: (pairs, the shape the message must print)
_UNEVEN_SHAPES = [
    ([("batch1", 1), ("login1", 1), ("gpu01", 4), ("gpu02", 4)], "batch1 1, login1 1, gpu01 4, gpu02 4"),
    ([("gpu01", 4), ("gpu02", 2)], "gpu01 4, gpu02 2"),
    ([("batch1", 1), ("gpu01", 4), ("gpu02", 2)], "batch1 1, gpu01 4, gpu02 2"),
    ([("gpu01", 2), ("gpu02", 1)], "gpu01 2, gpu02 1"),
    ([("gpu01", 4), ("gpu02", 1), ("gpu03", 4)], "gpu01 4, gpu02 1, gpu03 4"),
    ([("batch1", 1), ("login1", 1)] + [(f"gpu{i:02}", 4) for i in range(10)],
     "batch1 1, login1 1, gpu00 4, gpu01 4, gpu02 4, gpu03 4, ... (12 hosts in all)"),
]


def _lsf_env(tmp_path, pairs, source):
    if source == "LSB_MCPU_HOSTS":
        return {"LSB_JOBID": "77", "LSB_MCPU_HOSTS": " ".join(f"{h} {n}" for h, n in pairs)}
    path = tmp_path / "hostfile"
    path.write_text("".join(f"{h}\n" * n for h, n in pairs))
    return {"LSB_JOBID": "77", source: str(path)}


@pytest.mark.parametrize("source", ["LSB_DJOB_HOSTFILE", "LSB_MCPU_HOSTS"])
@pytest.mark.parametrize("pairs, me, planned", _EVEN_SHAPES)
def test_an_even_slot_shape_or_one_launch_host_first_is_planned(tmp_path, source, pairs, me, planned):
    from torchpod.schedulers.common import Facts

    env = _lsf_env(tmp_path, pairs, source)
    det = lsf.detect(env, Facts(hostname=me), user_options(env))
    assert (list(det.hosts), str(det.nnodes), det.node_rank) == (planned, str(len(planned)), planned.index(me))
    assert any("launch node" in n for n in det.notes) == (len(planned) < len(pairs))


@pytest.mark.parametrize("source", ["LSB_DJOB_HOSTFILE", "LSB_DJOB_RANKFILE", "LSB_MCPU_HOSTS"])
@pytest.mark.parametrize("pairs, shape", _UNEVEN_SHAPES)
def test_an_uneven_slot_shape_is_refused_in_one_line(tmp_path, source, pairs, shape):
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    env = _lsf_env(tmp_path, pairs, source)
    for host, _ in pairs:  # every host gets the same answer, the login host's included
        with pytest.raises(InputError) as caught:
            lsf.detect(env, Facts(hostname=host), user_options(env))
        message = str(caught.value)
        assert message.isprintable(), message
        assert message.startswith(f"{source}={env[source]!r} gives hosts and slots {shape}; ")
        assert "same slot count" in message and "one one-slot launch host" in message
        assert 'span[ptile=1]' in message
