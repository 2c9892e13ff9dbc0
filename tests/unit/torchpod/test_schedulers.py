"""Every scheduler fixture (tests/unit/fixtures/schedulers.yaml) resolves as expected."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.plan import to_dict

from launcher_cases import BAD, GOOD, materialise, plan_for, torch_accepts


@pytest.mark.parametrize("case", GOOD, ids=[c.name for c in GOOD])
def test_scheduler_environment_resolves(case, tmp_path):
    env, facts = materialise(case, tmp_path)
    plan = plan_for(env, case.argv, facts)
    got = to_dict(plan, "python")
    for key, want in case.expect.items():
        if key == "is_host":
            assert got["rdzv_conf"].get("is_host") == want, got["notes"]
        else:
            assert got[key] == want, (key, got)
    if case.notes_contain:
        assert any(case.notes_contain in n for n in plan.notes), plan.notes
    torch_accepts(plan.torchrun_args)


@pytest.mark.parametrize("case", BAD, ids=[c.name for c in BAD])
def test_bad_input_is_one_input_error_naming_it(case, tmp_path):
    env, facts = materialise(case, tmp_path)
    with pytest.raises(InputError) as info:
        plan_for(env, case.argv, facts)
    message = str(info.value)
    assert case.error in message
    assert "\n" not in message
    assert "expected" in message  # names the form it wanted


def test_every_scheduler_has_a_fixture():
    from torchpod.schedulers import BY_NAME

    covered = {c.expect.get("scheduler") for c in GOOD}
    assert set(BY_NAME) <= covered


def test_a_misspelt_scheduler_gets_the_closest_name_of_the_registry():
    from torchpod.errors import InputError
    from torchpod.options import UserOptions
    from torchpod.schedulers import requested

    with pytest.raises(InputError, match=r"^TORCHPOD_SCHEDULER='slrum' is not a known scheduler; did you mean "
                                         r"slurm\?; expected one of "):
        requested({"TORCHPOD_SCHEDULER": "slrum"}, UserOptions())
    with pytest.raises(InputError) as err:
        requested({"TORCHPOD_SCHEDULER": "cobalt"}, UserOptions())
    assert "did you mean" not in str(err.value)
