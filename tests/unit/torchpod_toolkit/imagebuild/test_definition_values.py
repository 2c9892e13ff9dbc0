"""torchpod_toolkit.imagebuild.definition_values: each check of a definition's value, called
directly: the value back in its normal form, or one line naming the file, the key, the
value seen and the form expected; and any text (all of Unicode, control characters) is one
or the other."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit import grammars
from torchpod_toolkit.imagebuild import definition_values as values

PATH = Path("img.yaml")


def test_a_value_that_fits_comes_back_in_its_normal_form():
    assert values.check_version(PATH, "torch.version", "2.13.0") == "2.13.0"
    assert values.check_pin(PATH, "p", "Python_Etcd==0.4.5") == ("python-etcd", "Python_Etcd==0.4.5")
    assert values.check_url(PATH, "u", "https://download.pytorch.org/whl/cu130", ("https",)) == \
        "https://download.pytorch.org/whl/cu130"
    assert values.check_sha256(None, "s", "0" * 64) == "0" * 64
    assert values.check_plugin_version(None, "v", "1.14.0-aws") == "1.14.0-aws"
    assert values.check_image_ref(PATH, "base.image", "ubuntu:24.04") == "ubuntu:24.04"
    assert values.check_each(PATH, ["mlx5", "efa"], "rdma_core.providers", values.PROVIDER, "a provider") == \
        ("mlx5", "efa")


@pytest.mark.parametrize("call, says", [
    (lambda: values.check_version(PATH, "torch.version", "2.13.0\n"), "img.yaml: torch.version='2.13.0\\n'; "
                                                                      "expected a PEP 440 version such as '2.13.0'"),
    (lambda: values.check_version(PATH, "torch.version", "1.0.0-rc1"), "in normal form: '1.0.0rc1'"),
    (lambda: values.check_version(PATH, "torch.version", "v2.13.0"), "in normal form: '2.13.0'"),
    (lambda: values.check_pin(PATH, "torch.extra_packages[0]", "numpy>=2"), "extra_packages[0]='numpy>=2'; "
                                                                            "expected a wheel pinned exactly"),
    (lambda: values.check_url(PATH, "base.mirror", "ftp://x/", ("http", "https")), "expected a URL (http, https;"),
    (lambda: values.check_url(PATH, "base.mirror", "http://[::1", ("http",)), "base.mirror='http://[::1'"),
    (lambda: values.check_url(PATH, "base.mirror", "http://h:0/", ("http",)), "base.mirror='http://h:0/'"),
    (lambda: values.check_sha256(None, "--netplugin-sha256", "A" * 64), "--netplugin-sha256='AAAA"),
    (lambda: values.check_image_ref(PATH, "base.image", "Ubuntu"), "expected an image reference"),
    (lambda: values.check_each(PATH, ["ok1", "Bad"], "rdma_core.packages", grammars.DEBIAN_PACKAGE, "a name"),
     "rdma_core.packages[1]='Bad'; expected a name"),
])
def test_a_value_that_does_not_fit_is_one_line_naming_key_value_and_form(call, says):
    with pytest.raises(InputError) as info:
        call()
    assert says in str(info.value) and str(info.value).isprintable()


@pytest.mark.parametrize("torch, series", [("2.0.1", "0.15"), ("2.9.1", "0.24"), ("2.13.0", "0.28"),
                                           ("2.14.1", "0.29"), ("1.13.1", None)])
def test_torchvision_series_follows_torchs_minor(torch, series):
    assert values.torchvision_series(torch) == series


def test_torchvision_must_be_of_torchs_series():
    assert values.check_torchvision(PATH, "2.13.0", "0.28.0") == "0.28.0"
    with pytest.raises(InputError, match=r"torch.torchvision='0.27.0' does not match .* a torchvision 0.28.x"):
        values.check_torchvision(PATH, "2.13.0", "0.27.0")
    with pytest.raises(InputError, match="expected a torch 2.x release"):
        values.check_torchvision(PATH, "1.13.1", "0.14.1")


def test_a_tarball_is_a_path_inside_the_repository(tmp_path):
    definition = tmp_path / "images" / "img.yaml"
    definition.parent.mkdir()
    assert values.check_tarball(definition, "vendor/p.tar.gz") == tmp_path.resolve() / "vendor" / "p.tar.gz"
    for bad in ("../p.tar.gz", "/etc/passwd", "a b.tar.gz", 7):
        with pytest.raises(InputError, match="aws_ofi_nccl.tarball="):
            values.check_tarball(definition, bad)
    os.symlink("/", tmp_path / "out")
    with pytest.raises(InputError, match="it resolves to '/'"):
        values.check_tarball(definition, "out")


def test_a_value_shown_in_a_message_is_cut_short():
    assert values.shown("x" * 500).endswith("...") and len(values.shown("x" * 500)) == 203
    assert str(values.bad(None, "k", "v", "w")) == "k='v'; expected w"


CHECKS = [
    lambda v: values.check_version(PATH, "k", v),
    lambda v: values.check_pin(PATH, "k", v),
    lambda v: values.check_url(PATH, "k", v, ("http", "https", "file")),
    lambda v: values.check_sha256(PATH, "k", v),
    lambda v: values.check_plugin_version(PATH, "k", v),
    lambda v: values.check_image_ref(PATH, "k", v),
    lambda v: values.checked(PATH, "k", v, grammars.DEBIAN_PACKAGE, "a Debian package name"),
]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(range(len(CHECKS))), st.one_of(st.text(st.characters(codec=None), max_size=80),
                                                        st.integers(), st.none(), st.lists(st.text(max_size=4))))
def test_any_value_is_accepted_whole_printable_and_one_word_or_one_line(which, value):
    try:
        got = CHECKS[which](value)
    except InputError as exc:
        assert str(exc).startswith("img.yaml: k=") and str(exc).isprintable()
        return
    text = got[1] if isinstance(got, tuple) else got
    assert isinstance(text, str) and text.isascii() and text.isprintable() and " " not in text
