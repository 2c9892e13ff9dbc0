"""The `invoke manifests` option table and the count grammar (manifests.options)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit.manifests import options
from torchpod_toolkit.manifests.jobspec import JobSpec

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def test_the_table_lists_the_declared_options_in_order():
    names = [name for name, _ in options.options()]
    assert names[:3] == ["scheduler", "nodes", "image"] and options.required() == ("scheduler", "nodes", "image")
    assert options.default("walltime") == "01:00:00" and "walltime" in options.given_apart()


def test_counts_and_spans_parse():
    assert options.parse_count("--nodes", "12", minimum=1, maximum=20) == 12
    assert options.parse_span("--nodes", "2:4", minimum=1, maximum=20) == (2, 4)
    assert options.parse_counts({"nodes": "2:4", "gpus_per_node": "8"}) == {"nodes": 4, "min_nodes": 2,
                                                                            "gpus_per_node": 8}


def test_check_counts_and_option_text():
    spec = options.check_counts(JobSpec("kubeflow-elastic", "2:4", IMAGE, ("t.py",)))  # type: ignore[arg-type]
    assert (spec.nodes, spec.min_nodes) == (4, 2) and options.option_text(spec, "nodes") == "2:4"


def test_check_taken_refuses_an_option_the_kind_has_no_place_for():
    with pytest.raises(InputError, match=r"^--queue=gpu: a kubeflow job has no place for it"):
        options.check_taken(JobSpec("kubeflow", 2, IMAGE, ("t.py",), queue="gpu"))


@given(st.text(max_size=30))
def test_hostile_a_count_is_ascii_digits_or_one_line_refusal(text):
    try:
        value = options.parse_count("--nodes", text, minimum=1, maximum=100)
    except InputError as exc:
        assert str(exc).startswith("--nodes=") and "\n" not in str(exc)
    else:
        assert text.isascii() and text.isdigit() and value == int(text)
