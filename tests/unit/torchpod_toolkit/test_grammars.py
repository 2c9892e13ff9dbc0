"""torchpod_toolkit.grammars: the image reference grammar of distribution/reference
(regexp.go), on the examples that project's own tests give for each part, and the one
grammar behind both checks of a reference: a job's --image (manifests.names) and an image
definition's base.image (imagebuild.definition_values)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod.errors import InputError
from torchpod_toolkit import grammars
from torchpod_toolkit.imagebuild import definition_values
from torchpod_toolkit.manifests import names

SHA256 = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize("name", [
    "ubuntu", "library/ubuntu", "torchpod/pytorch", "a", "a.b_c__d---e/f-g",
    "registry.example.com/torchpod/pytorch", "registry.example.com:5000/torchpod/pytorch",
    "localhost:5000/x", "[fe80::1]:5000/x", "[2001:db8::1]/x", "Registry-1.Example.COM/x",
])
def test_names_it_takes(name):
    assert grammars.NAME.fullmatch(name)


@pytest.mark.parametrize("name", [
    "", "Ubuntu", "a/", "/a", "a//b", "a..b", "a___b", "-a", "a-", "_a", "a b", "reg.io:/x",
    "reg.io:port/x", "-reg.io/x", "reg-.io/x", "[fe80::1/x", "[::g]/x", "a/B",
])
def test_names_it_refuses(name):
    assert not grammars.NAME.fullmatch(name)


@pytest.mark.parametrize("tag, ok", [
    ("2.13.0-cuda13.0-x86_64", True), ("_", True), ("a" * 128, True), ("a" * 129, False),
    (".a", False), ("-a", False), ("a+b", False), ("", False),
])
def test_tags(tag, ok):
    assert bool(grammars.TAG.fullmatch(tag)) is ok


@pytest.mark.parametrize("ref", [
    "ubuntu:24.04", f"ubuntu@{SHA256}", f"registry.example.com:5000/base/debian:12@{SHA256}",
    "localhost/x@sha512:" + "0" * 128, "[fe80::1]:5000/a/b:1",
])
def test_references_it_takes(ref):
    assert grammars.is_reference(ref)


@pytest.mark.parametrize("ref", [
    "ubuntu:", "ubuntu@", "ubuntu@sha256:" + "0" * 63, "ubuntu@sha256:" + "A" * 64, "ubuntu@md5:" + "0" * 32,
    "a:b:c", "a" * 256, "a" * 255 + ":" + "t" * 129, 7, None, b"ubuntu",
])
def test_references_it_refuses(ref):
    assert not grammars.is_reference(ref)


def test_a_name_is_at_most_255_characters_with_its_domain():
    assert grammars.is_reference("r.io/" + "a" * 250 + ":1")
    assert not grammars.is_reference("r.io/" + "a" * 251 + ":1")


@pytest.mark.parametrize("ref", ["registry.example.com:5000/torchpod/pytorch:2.13.0", f"ubuntu@{SHA256}"])
def test_both_checks_take_a_pinned_reference_from_the_one_grammar(ref):
    assert names.image_problem(ref) is None
    assert definition_values.check_image_ref(Path("img.yaml"), "base.image", ref) == ref


def test_both_checks_refuse_what_the_grammar_refuses():
    ref = "registry.example.com:5000/Torchpod/pytorch:2.13.0"
    assert "is not an image reference" in names.image_problem(ref)
    with pytest.raises(InputError, match=r"img\.yaml: base\.image="):
        definition_values.check_image_ref(Path("img.yaml"), "base.image", ref)


# k8s.io/apimachinery pkg/util/validation/validation_test.go's own good and bad examples
@pytest.mark.parametrize("pattern, good, bad", [
    (grammars.DNS1123_LABEL, ["a", "ab", "a-b", "0", "1-2", "a--b"], ["", "A", "-a", "a-", "a.b", "a_b", "ü"]),
    (grammars.DNS1035_LABEL, ["a", "a-b", "a1"], ["0", "1a", "-a", "a-", "A"]),
    (grammars.DNS1123_SUBDOMAIN, ["a", "a.b", "a-b.c-d", "0.a"], ["", "a..b", ".a", "a.", "A.b", "a_b"]),
    (grammars.QUALIFIED_NAME, ["a", "A", "a.b", "a_b", "A-B.c_d", "9"], ["", "-a", "a-", "a/b", "a b"]),
    (grammars.LABEL_VALUE, ["", "a", "A.b-c_d"], ["-", "a-", "a b", "a/b"]),
])
def test_each_kubernetes_name_grammar_takes_what_apimachinery_takes(pattern, good, bad):
    assert all(pattern.fullmatch(v) for v in good), [v for v in good if not pattern.fullmatch(v)]
    assert not any(pattern.fullmatch(v) for v in bad), [v for v in bad if pattern.fullmatch(v)]


# Quantities as apimachinery's ParseQuantity takes them (pkg/api/resource/quantity.go): the
# accepted forms of its quantity_test.go table, and forms it refuses.
@pytest.mark.parametrize("text", ["0", "1", "500m", "1.5", ".5", "+2", "-3", "2Gi", "128Mi", "1Ki", "1e3", "1E-2",
                                  "100n", "7u", "4k", "2M", "8Ei"])
def test_quantities_the_api_takes(text):
    assert grammars.QUANTITY.fullmatch(text)


@pytest.mark.parametrize("text", ["", "1.5.2", "Gi", "2gi", "2KiB", "1e", "1 Gi", "1Gi\n", "١", "--1", "2mi"])
def test_quantities_the_api_refuses(text):
    assert not grammars.QUANTITY.fullmatch(text)


@pytest.mark.parametrize("text, ok", [("256Gi", True), ("1536Mi", True), ("1Ti", True), ("0Gi", False),
                                      ("1.5Gi", False), ("2G", False), ("2Ki", False), ("1234567890Mi", False)])
def test_a_size_on_the_command_line_is_a_whole_number_and_a_binary_unit(text, ok):
    assert bool(grammars.BINARY_SIZE.fullmatch(text)) is ok
    # every size it takes is a quantity the API takes
    assert not ok or grammars.QUANTITY.fullmatch(text)


@pytest.mark.parametrize("text, ok", [("4", True), ("0.5", True), ("500m", True), ("2Gi", False), ("1e3", False),
                                      ("-1", False)])
def test_the_modelled_counts_are_a_part_of_the_quantities(text, ok):
    assert bool(grammars.WHOLE_OR_MILLI.fullmatch(text)) is ok
    assert not ok or grammars.QUANTITY.fullmatch(text)
