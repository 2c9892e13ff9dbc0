"""torchpod_toolkit.grammars, hostile: any text (all of Unicode, control characters) and
references built from the grammar's parts with any registry port, given to both checks of a
reference (a job's --image in manifests.names, an image definition's base.image in
imagebuild.definition_values). The two once held different port rules, one any digits and one at most five:
both now follow distribution/reference's optionalPort, ``(?::[0-9]+)?``, so they answer
alike for every value."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit import grammars
from torchpod_toolkit.imagebuild import definition_values
from torchpod_toolkit.manifests import names

PATH = Path("img.yaml")


def _definitions_take(ref: object) -> bool:
    try:
        return definition_values.check_image_ref(PATH, "base.image", ref) == ref
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("img.yaml: base.image=")
        return False


def _pinned(ref: str) -> bool:
    match = grammars.REFERENCE.fullmatch(ref)
    return match is not None and (match["digest"] is not None or match["tag"] not in (None, "latest"))


@pytest.mark.parametrize("port", ["5000", "123456", "0", "00005000", "99999999999999999999"])
def test_a_registry_port_of_any_digits_is_taken_by_both_checks_alike(port):
    # the case where the two checks differed: a port of more than five digits
    ref = f"registry.example.com:{port}/torchpod/pytorch:2.13.0"
    assert names.image_problem(ref) is None
    assert _definitions_take(ref)


@pytest.mark.parametrize("port", ["", "x", "5000a", "-1", "+5000", "\u0665\u0660\u0660\u0660", "5000\n"])
def test_a_registry_port_that_is_not_ascii_digits_is_refused_by_both_checks(port):
    ref = f"registry.example.com:{port}/torchpod/pytorch:2.13.0"
    assert names.image_problem(ref) is not None
    assert not _definitions_take(ref)


COMPONENT = st.from_regex(grammars.PATH_COMPONENT, fullmatch=True).filter(lambda c: len(c) <= 40)
DOMAIN = st.one_of(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?(\.[a-z]{1,6}){1,2}", fullmatch=True),
                   st.sampled_from(["localhost", "[fe80::1]", "[2001:db8::7]"]))
PORT = st.one_of(st.none(), st.from_regex(r"[0-9]{1,12}", fullmatch=True), st.text(max_size=6))
TAG = st.one_of(st.none(), st.just("latest"), st.from_regex(grammars.TAG, fullmatch=True), st.text(max_size=8))
DIGEST = st.one_of(st.none(), st.sampled_from(["sha256:" + "0" * 64, "sha512:" + "f" * 128, "sha256:" + "0" * 63]))


@st.composite
def references(draw):
    """A reference built from the grammar's parts, with any port and sometimes a tag that is
    any text."""
    domain, port = draw(st.one_of(st.none(), DOMAIN)), draw(PORT)
    name = "/".join(draw(st.lists(COMPONENT, min_size=1, max_size=3)))
    if domain is not None:
        name = f"{domain}{'' if port is None else ':' + port}/{name}"
    tag, digest = draw(TAG), draw(DIGEST)
    return name + ("" if tag is None else f":{tag}") + ("" if digest is None else f"@{digest}")


@settings(max_examples=200, deadline=None)
@given(st.one_of(references(), st.text(max_size=60)))
@example("registry.example.com:123456/torchpod/pytorch:2.13.0")
@example("registry.example.com:5000/torchpod/pytorch:2.13.0\n")
def test_both_checks_answer_alike_for_any_value(ref):
    valid = grammars.is_reference(ref)
    assert _definitions_take(ref) is valid
    problem = names.image_problem(ref)
    assert problem is None or "\n" not in problem
    # --image asks more: a pinned tag or a digest
    assert (problem is None) is (valid and _pinned(ref)), (ref, problem)
