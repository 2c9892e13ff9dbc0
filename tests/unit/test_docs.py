"""README.md and docs/: the README stays a two-minute read whose commands are the ones CI
runs, every link between the pages resolves, and the figures written there that data
decides (how many CI images) agree with that data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchpod_toolkit.imagebuild.definitions import load_definitions

from paths import ROOT

README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight",
         9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def test_the_readme_is_read_in_two_minutes():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 120


def test_the_readme_opens_with_the_two_commands_ci_runs():
    text = README.read_text(encoding="utf-8")
    first_block = re.search(r"```\n(.*?)```", text, flags=re.DOTALL).group(1)
    assert first_block.splitlines() == [
        "./setup.sh && invoke build --arch x86_64 && invoke demo --scheduler volcano --nodes 2",
        "invoke test",
    ]
    assert text.index("```") < 30 * 80  # on the first screen
    ci = (ROOT / ".ci" / "run").read_text()
    # CI sets up for the tests (the first command's setup and the test tools, the engine's store
    # swept), then runs the test command
    assert re.search(r"^\./setup\.sh --tests --restart-docker$", ci, flags=re.MULTILINE)
    assert re.search(r"^invoke test$", ci, flags=re.MULTILINE)


def test_the_readme_tells_no_history():
    text = README.read_text(encoding="utf-8")
    found = re.findall(r"\b(was|were|now|previous(?:ly)?|this session|no longer|used to)\b", text, flags=re.IGNORECASE)
    assert not found, found


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        assert dest.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in anchors(dest), f"{page.name}: {target}: no heading with that anchor in {dest.name}"


def test_every_docs_page_is_reachable_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(README.read_text(encoding="utf-8"))}
    assert set(PAGES) <= linked, sorted(p.name for p in set(PAGES) - linked)


def test_the_ci_image_count_written_in_the_docs_is_the_definitions():
    ci = [d for d in load_definitions(ROOT / "images").values() if d.ci]
    images = sum(len(d.arches) for d in ci)
    text = " ".join((ROOT / "docs" / "images.md").read_text(encoding="utf-8").split())
    assert f"CI builds {WORDS[len(ci)]} definitions (`ci: true`), {WORDS[images]} images in all" in text
    for d in ci:
        assert f"`{d.name}`" in text.split("images in all")[1].split("\n")[0]
    testing = " ".join((ROOT / "docs" / "testing.md").read_text(encoding="utf-8").split())
    assert f"the {WORDS[images]} CI images" in testing and f"({WORDS[images]} images" in testing


def test_the_readmes_plan_is_what_torchpod_plans_for_that_node():
    """The README's first screen shows `torchpod plan` on node 10 of a 12-pod Volcano job with
    eight GPUs: each line it shows is a line of the plan torchpod makes there (the command
    line shortened at its '...')."""
    from torchpod.plan import to_text
    from torchpod.schedulers.common import Facts

    from launcher_cases import plan_for

    block = README.read_text().split("$ torchpod plan --format text -- train.py --epochs 3\n", 1)[1].split("```")[0]
    hosts = ",".join(f"job-worker-{i}.job" for i in range(12))
    env = {"VC_WORKER_HOSTS": hosts, "VC_WORKER_NUM": "12", "VC_TASK_INDEX": "10", "VK_TASK_INDEX": "10",
           "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    text = to_text(plan_for(env, facts=Facts(hostname="job-worker-10")), "python3")
    shown = [line for line in block.splitlines() if line.strip()]
    assert len(shown) >= 10, block
    for line in shown:
        if line.endswith("..."):
            assert any(t.startswith(line[:-3]) for t in text.splitlines()), (line, text)
        else:
            assert line in text.splitlines(), (line, text)


def test_the_kubernetes_first_job_page_watches_each_kind_by_its_own_object_and_labels():
    """Each row of the page's table: the watch command the kind declares (what --submit
    prints), and a label the operator gives its pods (the operator model's first pod)."""
    import yaml

    from torchpod_toolkit.manifests import jobs, operators
    from torchpod_toolkit.manifests.render import render
    from torchpod_toolkit.manifests.spec import JobSpec, check

    page = (ROOT / "docs" / "first-job" / "kubernetes.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `") and "kubectl" in line]
    named = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        kinds = re.findall(r"`([a-z-]+)`", cells[0])
        (selector,) = re.findall(r"-l ([^`]+)`", cells[2])
        key, value = selector.split("=")
        for name in kinds:
            named.add(name)
            spec = check(JobSpec(name, 2, "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0", ("train.py",),
                                 namespace="ml"))
            assert cells[1] == f"`{jobs.kind(name).watch.format(name='train', namespace='ml', id='ml/train')}`", row
            (out,) = [o for o in render(spec) if o.name.endswith(".yaml")]
            first = operators.pods([d for d in yaml.safe_load_all(out.text) if d])[0]
            assert dict(first.labels).get(key) == value, (name, dict(first.labels))
    assert named == set(jobs.KUBE), named
