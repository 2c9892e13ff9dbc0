"""Hostile image definitions: any text in any field, any bytes in a file, and the files that
cost a YAML loader memory, recursion or a hang. Each loads into values that fit their
grammars, or is one InputError line naming the file; never another exception."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.version import Version

from torchpod.errors import InputError
from torchpod_toolkit.imagebuild import commands
from torchpod_toolkit.imagebuild.commands import Builder
from torchpod_toolkit.imagebuild.definition_yaml import MAX_FILE_BYTES
from torchpod_toolkit.imagebuild.definitions import load_definitions

from paths import ROOT

SHA = "a" * 64
GOOD = {
    "description": "PyTorch for tests",
    "arches": ["x86_64", "arm64"],
    "base": {"debian": "bookworm", "mirror": "http://deb.debian.org/debian"},
    "python": "3.11",
    "torch": {"version": "2.13.0", "torchvision": "0.28.0", "index_url": "https://pypi.org/simple",
              "extra_index_url": "https://download.pytorch.org/whl/cu130",
              "extra_packages": ["numpy==2.4.6", "pillow==13.0.0"], "sdist_packages": ["python-etcd==0.4.5"]},
    "expect": {"cuda": "13.0", "nccl": "2.29.7"},
    "rdma_core": {"packages": ["libibverbs1", "ibverbs-providers"], "providers": ["mlx5", "efa"]},
    "aws_ofi_nccl": {"version": "1.14.0", "sha256": SHA, "tarball": "vendor/aws-ofi-nccl-1.14.0.tar.gz",
                     "libfabric": "efa"},
}
# Every text field, by its path in the file; lists are written as a one-element list.
FIELDS = [("description",), ("python",), ("base", "debian"), ("base", "mirror"), ("base", "image"),
          ("torch", "version"), ("torch", "torchvision"), ("torch", "index_url"), ("torch", "extra_index_url"),
          ("torch", "extra_packages"), ("torch", "sdist_packages"), ("expect", "cuda"), ("expect", "nccl"),
          ("rdma_core", "packages"), ("rdma_core", "providers"), ("arches",), ("extends",),
          ("aws_ofi_nccl", "version"), ("aws_ofi_nccl", "sha256"), ("aws_ofi_nccl", "url"),
          ("aws_ofi_nccl", "tarball"), ("aws_ofi_nccl", "libfabric")]
LISTS = {("torch", "extra_packages"), ("torch", "sdist_packages"), ("rdma_core", "packages"),
         ("rdma_core", "providers"), ("arches",)}

# The grammars, written out again here rather than imported, so that a loosened grammar in
# definitions.py fails these tests instead of agreeing with itself.
DOCKER_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
WORD = re.compile(r"[A-Za-z0-9_.:/~?#@!$&()*+,;=%\[\]][!-~]*")  # printable ASCII, no space, no leading '-'


def check_fits(defn, root: Path) -> None:
    """Every value of a loaded definition fits the grammar of where it goes."""
    t = defn.torch
    for version in (t.version, t.torchvision):
        assert str(Version(version)) == version and re.fullmatch(r"[0-9a-z.]+", version)
    for requirement in t.requirements:
        parsed = Requirement(requirement)
        (spec,) = parsed.specifier
        assert requirement == f"{parsed.name}=={spec.version}" and str(Version(spec.version)) == spec.version
        assert not parsed.extras and parsed.marker is None and parsed.url is None
    for arch in defn.arches:
        assert DOCKER_TAG.fullmatch(defn.tag(arch))
    for url in (t.index_url, t.extra_index_url or "https://x", defn.base.mirror):
        assert WORD.fullmatch(url) and re.match(r"(https?|file)://", url)
    assert re.fullmatch(r"3\.[0-9]+", defn.python) and re.fullmatch(r"[0-9]+\.[0-9]+", defn.expect.cuda)
    assert re.fullmatch(r"[0-9]+(\.[0-9]+)+", defn.expect.nccl)
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", p) for p in defn.rdma_core.packages)
    assert all(re.fullmatch(r"[a-z0-9_]+", p) for p in defn.rdma_core.providers)
    assert defn.description.isprintable()
    assert defn.base.debian is None or re.fullmatch(r"[a-z][a-z0-9]*", defn.base.debian)
    assert defn.base.image is None or WORD.fullmatch(defn.base.image)
    ofi = defn.aws_ofi_nccl
    if ofi is not None:
        assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+(-aws)?", ofi.version) and ofi.libfabric in ("efa", "cxi")
        assert ofi.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", ofi.sha256)
        assert (ofi.url is None) != (ofi.tarball is None)
        if ofi.tarball is not None:
            assert ofi.sha256 and ofi.tarball.is_relative_to(root.resolve())
        else:
            assert WORD.fullmatch(ofi.url) and re.match(r"https?://", ofi.url)
        return
    # What reaches the Dockerfile's unquoted expansions splits back into exactly the checked words.
    argv = commands.build_command(Builder("docker", buildx=False), defn, defn.arches[0], context=ROOT, tag="t",
                                  base_image="b", build_base_image="b")
    args = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--build-arg")
    assert args["PIP_TARGET"].split(" ") == commands.pip_target(defn, defn.arches[0])
    assert args["BASE_PACKAGES"].split(" ") == commands.base_packages(defn)
    assert all(WORD.fullmatch(w) for w in args["BASE_PACKAGES"].split(" "))
    # what reaches the lock's resolution and its pip lines: the checked pins, word for word
    assert commands.requirements(defn)[:len(defn.torch.requirements)] == list(defn.torch.requirements)
    assert all(WORD.fullmatch(w) and not w.startswith("-") for w in commands.requirements(defn))


def load_or_refuse(folder: Path):
    """The definitions, or the InputError's message checked to be one line naming the file."""
    try:
        return load_definitions(folder)
    except InputError as exc:
        message = str(exc)
        assert message.isprintable() and "img.yaml" in message, message
        return None


def with_field(field: tuple[str, ...], value) -> dict:
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in GOOD.items()}
    if field == ("extends",):
        data["extends"] = value
        return data
    *outer, key = field
    target = data[outer[0]] if outer else data
    target[key] = [value] if field in LISTS else value
    if field == ("base", "image"):
        target.pop("debian")
    if field == ("aws_ofi_nccl", "url"):
        target.pop("tarball")
    return data


def test_the_full_happy_definition_loads_with_every_field(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (images / "img.yaml").write_text(yaml.safe_dump(GOOD))
    defn = load_definitions(images)["img"]
    check_fits(defn, tmp_path)
    assert defn.torch.requirements == ("torch==2.13.0", "torchvision==0.28.0", "numpy==2.4.6", "pillow==13.0.0",
                                       "python-etcd==0.4.5")
    assert defn.aws_ofi_nccl.tarball == (tmp_path / "vendor" / "aws-ofi-nccl-1.14.0.tar.gz").resolve()
    check_fits(load_definitions(ROOT / "images")["pytorch"], ROOT)


# Other valid values a field may take, beside GOOD's.
VALID = {("base", "image"): "registry.example.com:5000/base/debian:12@sha256:" + SHA,
         ("aws_ofi_nccl", "url"): "https://example.com/aws-ofi-nccl-1.14.0.tar.gz", ("extends",): "parent",
         ("torch", "version"): "2.13.1rc1", ("torch", "torchvision"): "0.28.1", ("arches",): "amd64"}


def valid_of(field: tuple[str, ...]) -> str:
    if field in VALID:
        return VALID[field]
    value = GOOD[field[0]] if len(field) == 1 else GOOD[field[0]][field[1]]
    return value[0] if isinstance(value, list) else value


def hostile_text(field: tuple[str, ...]) -> st.SearchStrategy[str]:
    """All of Unicode but lone surrogates (no UTF-8 file can hold one), control characters
    included; and near misses: the field's valid value with any text put inside or after it."""
    valid = valid_of(field)
    return st.one_of(
        st.just(valid),
        st.text(max_size=40),
        st.builds(lambda i, extra: valid[:i] + extra + valid[i:], st.integers(0, len(valid)),
                  st.text(min_size=1, max_size=8)),
        st.sampled_from(["\n", "\r", "\x85", "\u2028", " ", "\t", "\x00", "*", " --index-url=http://evil/simple",
                         "; touch P", "\ufeff"]).map(lambda tail: valid + tail),
    )


@settings(deadline=None, max_examples=600, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field_value=st.sampled_from(FIELDS).flatmap(lambda f: st.tuples(st.just(f), hostile_text(f))))
@example(field_value=(("torch", "version"), "2.13.0 --index-url=http://evil/simple"))
@example(field_value=(("torch", "version"), "2.13.0\n"))
@example(field_value=(("aws_ofi_nccl", "tarball"), "../../../../etc/shadow"))
@example(field_value=(("base", "mirror"), "http://[deb.debian.org/debian"))  # urlsplit: ValueError
@example(field_value=(("torch", "index_url"), "https://pypi.org:99999/simple"))
@example(field_value=(("torch", "extra_index_url"), "file:x"))
def test_any_text_in_any_field_loads_into_its_grammar_or_is_one_line(tmp_path, field_value):
    field, value = field_value
    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
        images = Path(tmp) / "images"
        images.mkdir()
        (images / "img.yaml").write_text(yaml.safe_dump(with_field(field, value)))
        (images / "parent.yaml").write_text(yaml.safe_dump(GOOD))  # what 'extends' may name
        defs = load_or_refuse(images)
        if defs is not None:
            check_fits(defs["img"], Path(tmp))
        elif value == valid_of(field):
            pytest.fail(f"the valid {field}={value!r} was refused")


_GOOD_TEXT = yaml.safe_dump(GOOD)
YAMLISH = st.one_of(
    st.binary(max_size=600),
    st.text(alphabet=st.sampled_from(list("&*!|>-#?,:[]{}'\"%@`<=~\n\t \r\\abc019.") + ["\x85", "\u2028", "\ufeff"]),
            max_size=200).map(str.encode),
    # the good file with bytes spliced in, cut, or put in front
    st.builds(lambda i, junk, cut: (_GOOD_TEXT.encode()[:i] + junk + _GOOD_TEXT.encode()[i + cut:]),
              st.integers(0, len(_GOOD_TEXT)), st.binary(max_size=12), st.integers(0, 8)),
)


@settings(deadline=None, max_examples=500, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=YAMLISH)
@example(data=b"a: &a [x]\nb: *a\n")
@example(data=b"\xff\xfe")
@example(data=b"? [a, b]\n: 1\n")
@example(data=b"!!python/object/apply:os.system ['touch P']\n")
def test_any_bytes_in_a_definition_file_load_or_are_one_line(tmp_path, data):
    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
        images = Path(tmp) / "images"
        images.mkdir()
        (images / "img.yaml").write_bytes(data)
        defs = load_or_refuse(images)
        if defs is not None:
            check_fits(defs["img"], Path(tmp))


def _refuse(tmp_path: Path, text: str | bytes, needle: str) -> None:
    path = tmp_path / "img.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(InputError) as info:
        load_definitions(tmp_path)
    message = str(info.value)
    assert needle in message and "img.yaml" in message and message.isprintable(), message


@pytest.mark.parametrize("text, needle", [
    (b"arches: [x86_64]\ndescription: \xff\n", "not UTF-8 text (first at byte 30)"),
    ("? [a, b]\n: 1\n", "line 1: key of type list is not a string"),
    ("{1: x}\n", "line 1: key 1 is not a string"),
    ("- a\n- b\n", "expected a mapping of keys at the top level, got list"),
    ("", "expected a mapping of keys at the top level, got NoneType"),
    ("just text\n", "got str"),
    ("a: 1\n---\nb: 2\n", "malformed YAML: expected a single document in the stream but found another"),
    ("a: &x 1\n", "line 1: YAML anchors and aliases"),
    ("base: {<<: {debian: bookworm}}\n", "line 1: merge keys (<<) are not allowed"),
    ("description: 2024-13-45\n", "line 1: '2024-13-45' cannot be read (month must be in 1..12)"),
    ("description: " + "1" * 5000 + "\n", "cannot be read (Exceeds the limit"),
    ("description: !!python/object/apply:os.system ['touch P']\n", "malformed YAML"),
    ("description: !!binary aGk=\n", "'description' must be a str"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 32 levels"),
    ("a: " + "{b: " * 40 + "1" + "}" * 40 + "\n", "nested deeper than 32 levels"),
    ("".join(f"k{i}: 1\n" for i in range(3000)), "line 2048: more than 4096 keys and values"),
], ids=["non-utf8", "list-key", "int-key", "top-list", "empty", "top-str", "two-documents", "anchor", "merge-key",
        "bad-date", "5000-digits", "python-tag", "binary", "5000-deep-list", "40-deep-map", "3000-keys"])
def test_files_a_yaml_loader_chokes_on_are_one_line(tmp_path, text, needle):
    _refuse(tmp_path, text, needle)


def test_an_oversized_file_is_refused_unread(tmp_path):
    _refuse(tmp_path, b"#" * (MAX_FILE_BYTES + 1), f"is {MAX_FILE_BYTES + 1} bytes, over the 1 MiB cap")


def _load_in_child(folder: Path) -> subprocess.CompletedProcess:
    """load_definitions in a child with 1 GiB of address space and a 60 s guard: a regression
    that expands aliases or blocks on a FIFO fails the test instead of taking the machine."""
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from pathlib import Path\nfrom torchpod.errors import InputError\n"
            "from torchpod_toolkit.imagebuild.definitions import load_definitions\n"
            "try:\n    load_definitions(Path(sys.argv[1]))\nexcept InputError as e:\n    print(e); sys.exit(2)\n")
    try:
        return subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("loading the definitions hung")


def test_a_billion_laughs_is_refused_before_it_expands(tmp_path):
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    (tmp_path / "img.yaml").write_text("\n".join(lines) + "\n")  # 9**10 leaves if expanded
    proc = _load_in_child(tmp_path)
    assert proc.returncode == 2 and proc.stdout.strip().endswith(
        "img.yaml: line 1: YAML anchors and aliases (&name, *name) are not allowed; expected every value written out")


def test_a_fifo_a_device_or_a_directory_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "img.yaml")
    proc = _load_in_child(tmp_path)
    assert proc.returncode == 2 and "img.yaml is a FIFO (named pipe); expected a regular file" in proc.stdout
    (tmp_path / "img.yaml").unlink()
    (tmp_path / "img.yaml").symlink_to("/dev/zero")
    proc = _load_in_child(tmp_path)
    assert proc.returncode == 2 and "img.yaml is a character device; expected a regular file" in proc.stdout
    (tmp_path / "img.yaml").unlink()
    (tmp_path / "img.yaml").mkdir()
    with pytest.raises(InputError, match="img.yaml is a directory; expected a regular file: a YAML image definition"):
        load_definitions(tmp_path)


def test_a_file_name_that_is_no_repository_name_is_refused_before_reading(tmp_path):
    (tmp_path / "Bad\nName.yaml").write_text("a: 1\n")
    with pytest.raises(InputError) as info:
        load_definitions(tmp_path)
    assert "file name 'Bad\\nName.yaml'" in str(info.value) and str(info.value).isprintable()


def test_a_long_extends_chain_and_a_cycle_are_one_line(tmp_path):
    good = yaml.safe_dump({k: v for k, v in GOOD.items() if k != "aws_ofi_nccl"})
    for i in range(1500):
        (tmp_path / f"a{i}.yaml").write_text(f"extends: a{i + 1}\n")
    (tmp_path / "a1500.yaml").write_text(good)
    with pytest.raises(InputError, match=r"a0\.yaml: 'extends' chain a0 -> a1 .* is longer than 8"):
        load_definitions(tmp_path)
    for f in tmp_path.iterdir():
        f.unlink()
    for i in range(9):  # eight steps from its root still load
        (tmp_path / f"a{i}.yaml").write_text(f"extends: a{i + 1}\n" if i < 8 else good)
    assert load_definitions(tmp_path)["a0"].torch.version == "2.13.0"
    (tmp_path / "a9.yaml").write_text(good)
    (tmp_path / "a8.yaml").write_text("extends: a9\n")  # nine do not
    with pytest.raises(InputError, match=r"a0\.yaml: 'extends' chain a0 -> .* -> a9 is longer than 8"):
        load_definitions(tmp_path)
    (tmp_path / "a8.yaml").write_text("extends: a0\n")
    with pytest.raises(InputError, match="'extends' forms a cycle"):
        load_definitions(tmp_path)


def test_a_tarball_symlinked_out_of_the_repository_is_refused(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (tmp_path / "vendor").symlink_to("/etc")
    data = with_field(("aws_ofi_nccl", "tarball"), "vendor/shadow")
    (images / "img.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=r"aws_ofi_nccl.tarball='vendor/shadow'.*resolves to '/etc/shadow'"):
        load_definitions(images)
