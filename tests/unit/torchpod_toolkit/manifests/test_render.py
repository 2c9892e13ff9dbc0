"""torchpod_toolkit.manifests.render: the worked examples in manifests/ exist for every
scheduler and are exactly what their Regenerate line renders; the docs show the current
PBS launch line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchpod_toolkit.manifests import regenerate
from torchpod_toolkit.manifests import render as render_mod
from torchpod_toolkit.manifests.spec import HPC, KUBE

from paths import ROOT

EXAMPLES = ROOT / "manifests"


def _examples() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*") if p.is_file() and p.name != "README.md")


def test_worked_examples_exist_for_every_scheduler():
    shown = {m.group(1) for p in _examples() for m in [re.search(r"--scheduler (\S+)", p.read_text())] if m}
    assert shown == set(KUBE) | set(HPC)


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.name)
def test_worked_example_is_what_its_regenerate_line_renders(path):
    spec = regenerate.parse_invoke_line(regenerate.regenerate_line(path.read_text()))
    rendered = {o.name: o.text for o in render_mod.render(spec)}
    assert path.name in rendered, sorted(rendered)
    assert path.read_text() == rendered[path.name], f"{path} is stale: run `invoke manifests --refresh`"


def test_the_docs_show_the_current_pbs_script_that_fixes_seed_001():
    script = (EXAMPLES / "pbs" / "ddp.pbs-pals.sh").read_text()
    launch = next(line for line in script.splitlines() if line.startswith("mpiexec "))
    page = ROOT / "docs" / "manifests.md"
    assert launch in page.read_text(), "docs/manifests.md's PBS example is stale: copy it from the file"


@pytest.mark.parametrize("scheduler", sorted(set(KUBE) | set(HPC)))
def test_a_file_printed_to_a_pipe_says_how_to_submit_it_from_there(scheduler):
    from torchpod_toolkit.manifests import jobs
    from torchpod_toolkit.manifests.spec import JobSpec

    kind = jobs.kind(scheduler)
    spec = JobSpec(scheduler, 2, "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0", ("train.py",))
    text, _ = render_mod.printed(render_mod.render(spec, piped=True))
    (submit,) = [line for line in text.splitlines() if line.startswith("# Submit: ")]
    written = {o.name: o.text for o in render_mod.render(spec)}
    if kind.piped:  # never a file that was not written
        assert submit.startswith(f"# Submit: {kind.piped} with this file on standard input"), submit
        assert f".{kind.suffix}" not in submit.split("(")[0], submit
    else:
        assert "reads no standard input; --out DIR writes it" in submit, submit
    (name,) = [n for n in written if n.endswith(f".{kind.suffix}")]
    assert f"# Submit: {kind.submit} {name}" in written[name]  # written with --out: by its name


def test_what_a_user_must_see_reaches_stderr_when_the_file_goes_down_a_pipe():
    from torchpod_toolkit.manifests.spec import JobSpec

    spec = JobSpec("volcano", 2, "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0", ("train.py",),
                   privileged=True)
    text, notes = render_mod.printed(render_mod.render(spec, piped=True))
    assert any(n.startswith("Script: train.py is read from /workspace") for n in notes), notes
    assert any(n.startswith("WARNING --privileged") for n in notes), notes
    assert all(f"# {n}" in text for n in notes if not n.startswith("also "))  # and still in the header
