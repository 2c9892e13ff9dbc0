"""torchpod_toolkit.kube.build: the Go module in kube/ read and checked (the release, every
staging pin, the programs), the cache key, the one ``go build`` argv per program, and a build
that skips what is there, times what it builds and leaves nothing half written. ``go`` itself
is a stand-in script here: nothing is compiled."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.kube import build

from paths import ROOT

CONTROL_PLANE = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
GO_MOD = """module example/kube

go 1.26.0

require k8s.io/kubernetes v1.37.2

require (
\tgo.etcd.io/etcd/server/v3 v3.7.0
\tk8s.io/api v0.37.2 // indirect
)

replace k8s.io/api => k8s.io/api v0.37.2

replace (
\tk8s.io/client-go v0.0.0 => k8s.io/client-go v0.37.2 // a version on the left is allowed
)
"""
TOOLS = """//go:build tools

package tools

import (
\t_ "go.etcd.io/etcd/server/v3" // etcd
\t_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
"""


def _mod(text: str = GO_MOD) -> build.GoMod:
    return build.parse_go_mod(text, "go.mod")


# --- the module this repository commits ---------------------------------------------------

def test_the_committed_module_pins_one_release_and_every_staging_module_to_it():
    mod = build.parse_go_mod(build.read_text(ROOT / "kube" / "go.mod"), "kube/go.mod")
    release = build.kubernetes_release(mod, "kube/go.mod")
    minor = release.split(".")[1]
    assert release.startswith("v1.") and int(minor) >= 36  # etcd 3.5+ and the PodSecurity admission of 1.36+
    # every k8s.io module the build takes at the staging release, or at the v0.0.0 that only
    # k8s.io/kubernetes's own replaces resolve, is one of the pinned ones
    staging = f"v0.{minor}.{release.split('.')[2]}"
    taken = {path for path, version in mod.requires.items()
             if path.startswith("k8s.io/") and version in (staging, "v0.0.0")}
    assert {"k8s.io/api", "k8s.io/apiserver", "k8s.io/pod-security-admission"} <= taken <= set(mod.replaces)
    # etcd: the version that release names (build/dependencies.yaml), client and server alike
    assert mod.requires["go.etcd.io/etcd/server/v3"] == mod.requires["go.etcd.io/etcd/client/v3"]


def test_the_committed_tools_file_names_the_control_plane():
    programs = build.parse_tools(build.read_text(ROOT / "kube" / "tools.go"), "kube/tools.go")
    names = {p.name: p.package for p in programs}
    assert CONTROL_PLANE <= set(names)
    assert names["etcd"] == "go.etcd.io/etcd/server/v3"
    assert names["kube-apiserver"] == "k8s.io/kubernetes/cmd/kube-apiserver"


def test_the_module_holds_its_pins_and_the_tools_file_only():
    # no upstream source and no binary in the checkout: the build reads modules from Go's cache
    files = subprocess.run(["git", "ls-files", "--others", "--cached", "--exclude-standard", "kube"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    assert {"kube/go.mod", "kube/go.sum", "kube/tools.go"} <= set(files)
    for name in (n for n in files if Path(n).name not in ("go.mod", "go.sum")):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert name.endswith(".go") and text.startswith("//go:build tools\n"), name


# --- go.mod ----------------------------------------------------------------------------

def test_go_mod_blocks_single_lines_and_comments():
    mod = _mod()
    assert mod.requires == {"k8s.io/kubernetes": "v1.37.2", "go.etcd.io/etcd/server/v3": "v3.7.0",
                            "k8s.io/api": "v0.37.2"}
    assert mod.replaces == {"k8s.io/api": ("k8s.io/api", "v0.37.2"),
                            "k8s.io/client-go": ("k8s.io/client-go", "v0.37.2")}
    assert build.kubernetes_release(mod, "go.mod") == "v1.37.2"


@pytest.mark.parametrize("text, words", [
    ("require k8s.io/kubernetes\n", "require 'k8s.io/kubernetes'"),
    ("replace k8s.io/api => ../api\n", "replace 'k8s.io/api => ../api'"),
    ("replace (\n k8s.io/api v0.1.0\n)\n", "replace 'k8s.io/api v0.1.0'"),
    ("replace => k8s.io/api v0.1.0\n", "replace '=> k8s.io/api v0.1.0'"),
    ("replace k8s.io/api => k8s.io/api v0.2.0 x\n", "replace 'k8s.io/api => k8s.io/api v0.2.0 x'"),
])
def test_go_mod_lines_of_another_form_are_refused_by_line(text, words):
    with pytest.raises(InputError, match=f"go.mod:\\d+: {words}"):
        _mod(text)


@pytest.mark.parametrize("text, words", [
    (GO_MOD.replace("require k8s.io/kubernetes v1.37.2\n", ""), "require k8s.io/kubernetes .none."),
    (GO_MOD.replace("kubernetes v1.37.2", "kubernetes v1.37"), "require k8s.io/kubernetes v1.37;"),
    (GO_MOD.replace("k8s.io/api => k8s.io/api v0.37.2", "k8s.io/api => k8s.io/api v0.36.3"),
     "k8s.io/api => k8s.io/api v0.36.3; expected .* at v0.37.2"),
    (GO_MOD.replace("k8s.io/api => k8s.io/api v0.37.2", "k8s.io/api => example.com/fork v0.37.2"),
     "k8s.io/api => example.com/fork v0.37.2"),
    ("require k8s.io/kubernetes v1.37.2\n", "no k8s.io replace"),
])
def test_a_release_with_a_staging_module_off_its_pin_is_refused(text, words):
    with pytest.raises(InputError, match=words):
        build.kubernetes_release(_mod(text), "go.mod")


# --- tools.go --------------------------------------------------------------------------

def test_tools_names_each_program_by_comment_or_last_element():
    assert build.parse_tools(TOOLS, "tools.go") == (
        build.Program("etcd", "go.etcd.io/etcd/server/v3"),
        build.Program("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"))


@pytest.mark.parametrize("line", ['_ "k8s.io/kubernetes/cmd/kubectl" // ../kubectl',
                                  '_ "k8s.io/kubernetes/cmd/kubectl" // Kubectl',
                                  '_ "" // x', '_ "go.etcd.io/etcd/server/v3" //'])
def test_tools_refuses_a_name_outside_its_grammar(line):
    with pytest.raises(InputError, match="tools.go:1: "):
        build.parse_tools(line, "tools.go")


@pytest.mark.parametrize("text", ["package tools\n", TOOLS + '_ "example.com/x/etcd"\n'])
def test_tools_refuses_no_program_or_one_name_twice(text):
    with pytest.raises(InputError, match="expected one blank import per program"):
        build.parse_tools(text, "tools.go")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_hostile_module_files_are_parsed_or_refused_in_one_error(text):
    for parse in (build.parse_go_mod, build.parse_tools):
        try:
            parse(text, "f")
        except InputError:
            pass
    try:
        programs = build.parse_tools(TOOLS + text, "tools.go")
    except InputError:
        return
    assert all(build._PROGRAM.fullmatch(p.name) and "\n" not in p.package for p in programs)


def test_reads_are_regular_files_bounded_and_utf8(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 11)
    (tmp_path / "latin").write_bytes(b"caf\xe9")
    (tmp_path / "link").symlink_to(tmp_path / "latin")
    with pytest.raises(InputError, match="over the 10 bytes cap"):
        build.read_text(tmp_path / "big", cap=10)
    with pytest.raises(InputError, match="not UTF-8"):
        build.read_text(tmp_path / "latin")
    for path in (tmp_path / "link", tmp_path, tmp_path / "absent"):
        with pytest.raises(InputError, match="expected a regular file"):
            build.read_text(path)


# --- key, argv, places -------------------------------------------------------------------

def test_the_cache_key_moves_with_every_input_and_only_with_them():
    key = build.cache_key("mod", "sum", "go1.26.8")
    assert key == build.cache_key("mod", "sum", "go1.26.8") and len(key) == 16
    others = {build.cache_key("mod2", "sum", "go1.26.8"), build.cache_key("mod", "sum2", "go1.26.8"),
              build.cache_key("mod", "sum", "go1.26.9"), build.cache_key("mo", "dsum", "go1.26.8")}
    assert key not in others and len(others) == 4


def test_one_argv_per_program_niced_one_package_at_a_time_with_upstreams_flags():
    argv = build.build_argv("/go/bin/go", build.Program("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
                            Path("/c/bin/.kube-apiserver.partial"), "v1.37.2")
    assert argv[:5] == ["nice", "-n", "19", "/go/bin/go", "build"]
    assert argv[argv.index("-p") + 1] == "1" and "-trimpath" in argv
    assert argv[argv.index("-tags") + 1] == "selinux,notest,grpcnotrace"
    assert argv[-3:] == ["-o", "/c/bin/.kube-apiserver.partial", "k8s.io/kubernetes/cmd/kube-apiserver"]
    ldflags = argv[argv.index("-ldflags") + 1].split()
    assert ldflags[:2] == ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert {f"{package}.gitVersion=v1.37.2", f"{package}.gitMajor=1", f"{package}.gitMinor=37"} <= set(ldflags)
    with pytest.raises(InputError, match="expected vX.Y.Z"):
        build.version_ldflags("v1.37.2 -X evil=1")


def test_the_cache_lives_outside_the_checkout_under_xdg_or_home():
    assert build.cache_root({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/torchpod/kube")
    assert build.cache_root({"HOME": "/h"}) == Path("/h/.cache/torchpod/kube")
    with pytest.raises(InputError, match="neither XDG_CACHE_HOME nor HOME"):
        build.cache_root({})


def _fake_go(folder: Path, version: str = "go1.26.8") -> Path:
    """A `go` that answers `env GOVERSION` and, for `build`, writes its -o file."""
    folder.mkdir(parents=True, exist_ok=True)
    go = folder / "go"
    go.write_text(f"""#!/bin/sh
if [ "$1" = env ]; then echo {version}; exit 0; fi
while [ $# -gt 1 ]; do [ "$1" = -o ] && out=$2; shift; done
[ "$1" = example.com/broken ] && {{ echo "broken: no Go files" >&2; exit 1; }}
printf 'built %s cgo=%s in %s' "$1" "$CGO_ENABLED" "$PWD" > "$out"
""")
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    return go


def test_go_is_found_on_path_else_where_the_machines_carry_it(tmp_path, monkeypatch):
    go = _fake_go(tmp_path / "bin")
    assert build.find_go({"PATH": str(go.parent)}) == str(go)
    monkeypatch.setattr(build, "GO_FALLBACK", go)
    assert build.find_go({"PATH": str(tmp_path / "none")}) == str(go)
    monkeypatch.setattr(build, "GO_FALLBACK", tmp_path / "none" / "go")
    with pytest.raises(InputError, match="no `go` on PATH"):
        build.find_go({"PATH": ""})


# --- building ----------------------------------------------------------------------------

def _module(root: Path, tools: str = TOOLS) -> None:
    (root / "kube").mkdir(parents=True)
    (root / "kube" / "go.mod").write_text(GO_MOD)
    (root / "kube" / "go.sum").write_text("k8s.io/api v0.37.2 h1:x=\n")
    (root / "kube" / "tools.go").write_text(tools)


def test_build_makes_only_what_is_missing_one_go_build_each_and_times_it(tmp_path):
    _module(tmp_path / "repo")
    go = _fake_go(tmp_path / "bin")
    env = {"PATH": f"{go.parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    plan = build.plan_for(tmp_path / "repo", env)
    assert plan.bindir.parent.parent == tmp_path / "home" / ".cache" / "torchpod" / "kube"
    plan.bindir.mkdir(parents=True)
    (plan.bindir / "etcd").write_text("already built")
    ticks, said = iter([10.0, 12.5]), []
    done = build.build(plan, env, clock=lambda: next(ticks), say=said.append)
    assert done == [build.Built("etcd", None), build.Built("kube-apiserver", 2.5)]
    assert (plan.bindir / "etcd").read_text() == "already built"
    built = (plan.bindir / "kube-apiserver").read_text()
    assert built == f"built k8s.io/kubernetes/cmd/kube-apiserver cgo=0 in {plan.module.resolve()}"
    assert "kube-apiserver: built in 2 s" in said
    assert sorted(p.name for p in plan.bindir.iterdir()) == [".lock", "etcd", "kube-apiserver"]
    assert plan.missing() == ()
    assert build.table(done).splitlines()[1:] == [f"{'etcd':<26}{'present':>10}", f"{'kube-apiserver':<26}{'2':>10}"]


def test_a_failed_build_names_its_package_and_leaves_no_binary(tmp_path):
    _module(tmp_path / "repo", TOOLS + '_ "example.com/broken"\n')
    go = _fake_go(tmp_path / "bin")
    env = {"PATH": f"{go.parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    plan = build.plan_for(tmp_path / "repo", env)
    with pytest.raises(RuntimeFailure, match="go build example.com/broken failed .exit 1."):
        build.build(plan, env, say=lambda _: None)
    assert sorted(p.name for p in plan.bindir.iterdir()) == [".lock", "etcd", "kube-apiserver"]
    assert [p.name for p in plan.missing()] == ["broken"]


def test_main_prints_the_table_or_the_bindir_or_one_line(tmp_path, capsys):
    _module(tmp_path / "repo")
    go = _fake_go(tmp_path / "bin")
    env = {"PATH": f"{go.parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    assert build.main(["--root", str(tmp_path / "repo"), "--print-bindir"], env) == 0
    bindir = Path(capsys.readouterr().out.strip())
    assert not bindir.exists()
    assert build.main(["--root", str(tmp_path / "repo")], env) == 0
    assert "kube-apiserver" in capsys.readouterr().out and (bindir / "kube-apiserver").is_file()
    os.remove(tmp_path / "repo" / "kube" / "go.sum")
    assert build.main(["--root", str(tmp_path / "repo")], env) == 2
    err = capsys.readouterr().err
    assert err.startswith("torchpod: ") and "go.sum: expected a regular file" in err and err.count("\n") == 1


# --- the operators' modules ------------------------------------------------------------------

OPERATOR_GO_MOD = """module example/kube/operators/jobset

go 1.26.0

require sigs.k8s.io/jobset v0.12.0

require (
\tk8s.io/api v0.36.0 // indirect
\tsigs.k8s.io/jobset/api v0.1.0 // indirect
)
"""
OPERATOR_TOOLS = """//go:build tools

package tools

import (
\t_ "sigs.k8s.io/jobset" // jobset
)
"""


def _operator(root: Path, name: str = "jobset", go_mod: str = OPERATOR_GO_MOD, tools: str = OPERATOR_TOOLS) -> Path:
    folder = root / "kube" / "operators" / name
    folder.mkdir(parents=True)
    (folder / "go.mod").write_text(go_mod)
    (folder / "go.sum").write_text(f"sigs.k8s.io/jobset v0.12.0 h1:{name}=\n")
    (folder / "tools.go").write_text(tools)
    return folder


def test_the_committed_operator_modules_each_pin_one_release_of_their_operator():
    modules = build.operator_modules(ROOT)
    assert {"training-operator", "jobset"} <= {m.name for m in modules}
    for module in modules:
        mod = build.parse_go_mod(build.read_text(module / "go.mod"), str(module / "go.mod"))
        programs = build.parse_tools(build.read_text(module / "tools.go"), str(module / "tools.go"))
        upstream, version = build.upstream_of(mod, programs, str(module / "go.mod"))
        assert version.startswith("v") and upstream in mod.requires
        if "k8s.io/kubernetes" in mod.requires:  # its staging modules pinned as its own go.mod pins them
            build.kubernetes_release(mod, str(module / "go.mod"))


def test_the_operator_is_the_required_module_its_programs_lie_in():
    mod = build.parse_go_mod(OPERATOR_GO_MOD, "go.mod")
    programs = build.parse_tools(OPERATOR_TOOLS, "tools.go")
    assert build.upstream_of(mod, programs, "go.mod") == ("sigs.k8s.io/jobset", "v0.12.0")
    # the longest required path owns a package
    inner = (build.Program("x", "sigs.k8s.io/jobset/api/cmd"),)
    assert build.upstream_of(mod, inner, "go.mod") == ("sigs.k8s.io/jobset/api", "v0.1.0")
    for programs, words in [((build.Program("x", "example.com/other"),), "no required module"),
                            ((build.Program("a", "sigs.k8s.io/jobset"), build.Program("b", "k8s.io/api/x")),
                             r"\['k8s.io/api', 'sigs.k8s.io/jobset'\]")]:
        with pytest.raises(InputError, match=f"go.mod: programs .* lie in {words}"):
            build.upstream_of(mod, programs, "go.mod")
    odd = build.parse_go_mod(OPERATOR_GO_MOD.replace("jobset v0.12.0", "jobset latest"), "go.mod")
    with pytest.raises(InputError, match="require sigs.k8s.io/jobset latest; expected a release"):
        build.upstream_of(odd, build.parse_tools(OPERATOR_TOOLS, "tools.go"), "go.mod")


def test_every_module_is_planned_with_a_key_of_its_own_and_built_in_turn(tmp_path):
    _module(tmp_path / "repo")
    _operator(tmp_path / "repo", "jobset")
    _operator(tmp_path / "repo", "another")
    (tmp_path / "repo" / "kube" / "operators" / "notes").mkdir()  # no go.mod: not a module
    go = _fake_go(tmp_path / "bin")
    env = {"PATH": f"{go.parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    plans = build.plans_for(tmp_path / "repo", env)
    assert [p.name for p in plans] == ["plane", "another", "jobset"]
    assert len({p.bindir for p in plans}) == 3 and plans[2].kubernetes == ""
    said: list[str] = []
    text = build.build_all(plans, env, clock=iter(range(100)).__next__, say=said.append)
    assert "jobset: building sigs.k8s.io/jobset (sigs.k8s.io/jobset v0.12.0)" in said
    assert text.splitlines()[0].split() == ["module", "program", "build", "s"]
    assert [line.split()[:2] for line in text.splitlines()[1:]] == [
        ["plane", "etcd"], ["plane", "kube-apiserver"], ["another", "jobset"], ["jobset", "jobset"]]
    argv = build.build_argv("go", plans[2].programs[0], Path("/o"), plans[2].kubernetes)
    assert argv[argv.index("-ldflags") + 1] == "-s -w"  # an operator: stripped, no Kubernetes version
    assert build.operator_plan_for(tmp_path / "repo", env, "jobset") == plans[2]
    with pytest.raises(InputError, match="operator 'kueue': no .*; expected one of: another, jobset"):
        build.operator_plan_for(tmp_path / "repo", env, "kueue")


def test_main_builds_one_module_by_name(tmp_path, capsys):
    _module(tmp_path / "repo")
    _operator(tmp_path / "repo")
    go = _fake_go(tmp_path / "bin")
    env = {"PATH": f"{go.parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    assert build.main(["--root", str(tmp_path / "repo"), "--module", "jobset"], env) == 0
    out = capsys.readouterr().out
    assert "jobset" in out and "kube-apiserver" not in out
    assert build.main(["--root", str(tmp_path / "repo"), "--module", "jobset", "--print-bindir"], env) == 0
    assert (Path(capsys.readouterr().out.strip()) / "jobset").is_file()
    assert build.main(["--root", str(tmp_path / "repo"), "--module", "nope"], env) == 2
