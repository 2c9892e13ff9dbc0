"""What a batch system and a site ask of a job (manifests.sitefields)."""

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import sitefields
from torchpod_toolkit.manifests.jobspec import JobSpec

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def _job(scheduler="slurm", **fields):
    return JobSpec(scheduler, 2, IMAGE, ("t.py",), **fields)


def test_walltime_days_become_hours_and_are_checked():
    spec = sitefields.walltime_in_hours(_job(walltime="2-01:30:00"))
    assert spec.walltime == "49:30:00" and sitefields.check_walltime(spec) is spec


def test_runtime_is_filled_in_and_binds_follow_it():
    assert sitefields.check_runtime(_job()).runtime == "apptainer"
    assert sitefields.check_runtime(_job("kubeflow")).runtime == "none"
    with pytest.raises(InputError, match=r"^--site-lib=/opt/x with --runtime none"):
        sitefields.check_binds(_job(runtime="none", site_lib="/opt/x"))


def test_requeue_needs_room_before_the_wall_time():
    assert sitefields.check_requeue(_job(requeue_lead=300)).requeue_lead == 300
    with pytest.raises(InputError, match=r"^--requeue-lead=3600 with --walltime=01:00:00 \(3600 s\)"):
        sitefields.check_requeue(_job(requeue_lead=3600))


@pytest.mark.parametrize("value", ["00:00:00", "1:00", "01:60:00", "\u0661:00:00", "01:00:00\n"])
def test_hostile_walltime_is_refused_in_one_line(value):
    with pytest.raises(InputError) as err:
        sitefields.check_walltime(sitefields.walltime_in_hours(_job(walltime=value)))
    assert str(err.value).startswith(f"--walltime={value!r}; expected HH:MM:SS") and "\n" not in str(err.value)


def test_hostile_site_lib_with_a_separator_is_refused():
    with pytest.raises(InputError, match=r"^--site-lib='/opt/a,b'; expected an absolute host path"):
        sitefields.check_site_lib(_job(site_lib="/opt/a,b"))
