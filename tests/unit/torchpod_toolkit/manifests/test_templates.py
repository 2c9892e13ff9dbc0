"""torchpod_toolkit.manifests.templates: the templates that give every recorded value of one
field, and the value a template gives another pod; a value no template fits is refused, and
templates that fit alike must agree on the pod they are applied to."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import templates


def test_the_derivation_finds_the_quantity_behind_each_number():
    slots = [({"name": n, "namespace": "ns", "role": "w", "role_lower": "w"}, {"index": i, "count": c, "nproc": p})
             for n, c, p in (("a", 2, 3), ("b", 3, 5)) for i in range(c)]
    t = templates.template([(s, q, f"{s['name']}-w-{q['index']}:{q['count'] * q['nproc']}") for s, q in slots], "X")
    assert templates.render(t, {"name": "job", "namespace": "x", "role": "w", "role_lower": "w"},
                         {"index": 7, "count": 9, "nproc": 8}, "X") == "job-w-7:72"


def test_a_list_joins_one_item_template_over_a_count():
    obs = [({"name": n, "namespace": "ns"}, {"count": c}, ",".join(f"{n}-{i}.{n}" for i in range(c)))
           for n, c in (("a", 2), ("b", 3))]
    t = templates.template(obs, "HOSTS")
    assert isinstance(t, templates.Joined)
    assert templates.render(t, {"name": "z", "namespace": "ns"}, {"count": 4}, "HOSTS") == "z-0.z,z-1.z,z-2.z,z-3.z"


def test_quantities_equal_in_every_recording_must_agree_on_the_job_modelled():
    """count and max were 2 and 3 alike in both recordings: either may be the one, so a job
    where they differ is refused in one line, never guessed."""
    obs = [({"name": "a", "namespace": "ns"}, {"count": c, "max": c}, str(c)) for c in (2, 3)]
    t = templates.template(obs, "PET_NNODES")
    assert templates.render(t, {"name": "j", "namespace": "ns"}, {"count": 5, "max": 5}, "PET_NNODES") == "5"
    with pytest.raises(InputError, match=r"^j: PET_NNODES is 4 or 5 by the recordings, which never saw a job where "
                                         r"these differ; expected a job shaped like a recorded one$"):
        templates.render(t, {"name": "j", "namespace": "ns"}, {"count": 4, "max": 5}, "PET_NNODES")


@pytest.mark.parametrize("values", [["7", "9"], ["a-x", "b-y"], ["1,2", "3"]])
def test_a_value_no_template_gives_is_a_derivation_error(values):
    obs = [({"name": n, "namespace": "ns"}, {"index": 0}, v) for n, v in zip("ab", values)]
    with pytest.raises(templates.DeriveError, match="^X: no template gives every recorded value"):
        templates.template(obs, "X")


def test_an_entry_that_is_text_alone_stays_text():
    obs = [({"name": n, "namespace": "ns"}, {"index": i}, "default") for n in "ab" for i in range(2)]
    assert templates.render(templates.template(obs, "X"), {"name": "z", "namespace": "q"}, {"index": 9}, "X") \
        == "default"


def test_a_number_the_job_does_not_state_is_refused_not_left_out():
    obs = [({"name": "a", "namespace": "ns"}, {"min": m, "index": 0}, str(m)) for m in (2, 3)]
    t = templates.template(obs, "PET_NNODES")
    with pytest.raises(InputError, match="^j: PET_NNODES is made of min, which this job does not state; "):
        templates.render(t, {"name": "j", "namespace": "ns"}, {"index": 0}, "PET_NNODES")
