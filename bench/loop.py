"""The loop a developer waits on: the README's first command and CI, from a fresh clone,
each phase timed from the lines the commands print.

    python bench/loop.py first --label before|after [--log FILE]
    python bench/loop.py ci --label before|after [--log FILE]

Without ``--log``, clones HEAD into a temporary folder and runs there, as a newcomer and CI
do: ``first`` runs the README's first command (``./setup.sh && invoke build --arch x86_64
&& invoke demo --scheduler volcano --nodes 2``), ``ci`` runs ``bash .ci/run`` with CI=true.
Every line it prints is stamped with the time it arrived, and the stamped log is kept
(its path is printed). With ``--log``, reads such a stamped log instead (``<epoch seconds>
<line>`` per line), so a run made by hand is measured the same way.

The phases come from what the commands print: ``==> NAME`` starts a step, which ends at the
next one; the README's command is cut into setup (to ``==> ready:``), build (to the demo's
first node line) and demo; CI into setup, stage 1 and stage 2, and stage 2 into the image
builds and each pytest run. pytest's ``--durations`` lines give the slowest tests.

Writes the entry under its label into bench/results/loop.json (``first.before``, ...);
``invoke measurements`` renders it. A fresh *machine* (nothing installed) is the caller's
to provide: docs/measurements.md, "The loop", says how the figures were made.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))  # torchpod.readers: standard library only, as this script

from torchpod import readers  # noqa: E402  (the bounded reader)
from torchpod.errors import InputError  # noqa: E402

RESULT = ROOT / "bench" / "results" / "loop.json"
LOG_CAP = 256 << 20  # a stamped log of one run: a few MiB of build and test output
FIRST = "./setup.sh && invoke build --arch x86_64 && invoke demo --scheduler volcano --nodes 2"
MARKER = re.compile(r"^==> (.+)$")
# pytest --durations: "12.34s call     tests/cluster/test_x.py::test_y"
DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (call|setup|teardown) +(\S+)$")
PYTEST_START = re.compile(r"^=+ test session starts =+$")
PYTEST_END = re.compile(r"^=* ?(?:\d+ (?:passed|failed|error|errors|skipped|deselected|warnings?|xfailed|xpassed)"
                        r"(?:, )?)+ in [\d.]+s")


def stamped(lines: list[str]) -> list[tuple[float, str]]:
    """``<epoch seconds> <line>`` lines as (time, text); a line without a stamp is refused."""
    out = []
    for n, line in enumerate(lines, 1):
        stamp, _, text = line.rstrip("\n").partition(" ")
        try:
            out.append((float(stamp), text))
        except ValueError:
            raise SystemExit(f"bench/loop.py: line {n} of the log has no time stamp ({stamp[:40]!r}); expected "
                             "'<epoch seconds> <line>' as this script writes") from None
    if not out:
        raise SystemExit("bench/loop.py: the log is empty; expected the stamped output of a run")
    return out


def steps(log: list[tuple[float, str]], end: float) -> list[tuple[str, float]]:
    """Each ``==> NAME`` line starts a step that lasts until the next one (or ``end``)."""
    marks = [(t, m.group(1)) for t, text in log if (m := MARKER.match(text.strip()))]
    return [(name, round(((marks[i + 1][0] if i + 1 < len(marks) else end) - t), 1))
            for i, (t, name) in enumerate(marks)]


def _cut(log: list[tuple[float, str]], cuts: list[tuple[str, re.Pattern]], end: float) -> dict[str, float]:
    """Phases that start at the first line matching each pattern (in order), the first at the
    log's start; a phase whose line never came is absent."""
    starts: list[tuple[str, float]] = [(cuts[0][0], log[0][0])]
    i = 0
    for name, pattern in cuts[1:]:
        while i < len(log) and not pattern.search(log[i][1]):
            i += 1
        if i == len(log):
            break
        starts.append((name, log[i][0]))
    return {name: round((starts[k + 1][1] if k + 1 < len(starts) else end) - t, 1)
            for k, (name, t) in enumerate(starts)}


def first_phases(log: list[tuple[float, str]], end: float) -> dict[str, float]:
    return _cut(log, [("setup", re.compile("")), ("build", re.compile(r"^==> ready:")),
                      ("demo", re.compile(r"^demo-\S+ \| "))], end)


def ci_phases(log: list[tuple[float, str]], end: float) -> dict[str, float]:
    """setup, stage 1, then stage 2 cut into its pytest runs (a run that follows image builds
    is named after them: 'build CI images')."""
    phases = _cut(log, [("setup", re.compile("")), ("stage 1", re.compile(r"^==> stage 1")),
                        ("stage 2", re.compile(r"^==> stage 2"))], end)
    stage2 = next((t for t, text in log if text.startswith("==> stage 2")), None)
    if stage2 is None:
        return phases
    runs: list[tuple[str, float]] = []
    tier = None
    for t, text in log:
        if t < stage2:
            continue
        named = re.match(r"^==> (tier [^:]+|build CI images)$", text)
        if named:
            tier = named.group(1)
            runs.append((tier, t))
        elif PYTEST_START.match(text) and tier is None:  # one pytest run over every tier
            runs.append(("pytest (every tier)", t))
            tier = "pytest"
        elif text.startswith(("==> wheels", "==> wheelhouse")) and not runs:
            runs.append(("build CI images", t))
    for k, (name, t) in enumerate(runs):
        later = runs[k + 1][1] if k + 1 < len(runs) else _stage2_end(log, end)
        phases[f"stage 2: {name}"] = round(later - t, 1)
    return phases


def _stage2_end(log: list[tuple[float, str]], end: float) -> float:
    return next((t for t, text in log if re.match(r"^==> stage 2 .*took", text)), end)


def slowest(log: list[tuple[float, str]], count: int = 30) -> list[list]:
    found = [(float(m.group(1)), f"{m.group(2)} {m.group(3)}") for _, text in log if (m := DURATION.match(text))]
    return [[s, what] for s, what in sorted(found, reverse=True)[:count]]


def outcome(log: list[tuple[float, str]]) -> dict[str, int]:
    """Tests passed and failed, summed over every pytest run of the log."""
    total = {"passed": 0, "failed": 0}
    for _, text in log:
        if PYTEST_END.match(text):
            for n, word in re.findall(r"(\d+) (passed|failed)", text):
                total[word] += int(n)
    return total


def measure(what: str, lines: list[str], commit: str) -> dict:
    log = stamped(lines)
    exit_line = next((text for _, text in reversed(log) if text.startswith("EXIT ")), "EXIT ?")
    end = log[-1][0]
    entry = {"commit": commit, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(log[0][0])),
             "total_s": round(end - log[0][0], 1), "exit": exit_line.split()[1],
             "phases": (first_phases if what == "first" else ci_phases)(log, end),
             "steps": [list(s) for s in steps(log, end)]}
    if what == "ci":
        entry["tests"] = outcome(log)
        entry["slowest"] = slowest(log)
    return entry


def run(what: str, log_path: Path) -> str:
    """Clone HEAD afresh and run the command there, stamping every line into ``log_path``."""
    clone = Path(tempfile.mkdtemp(prefix=f"torchpod-loop-{what}-"))
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    command = ["bash", "-c", FIRST] if what == "first" else ["bash", ".ci/run"]
    env = dict(os.environ, CI="true") if what == "ci" else dict(os.environ)
    with log_path.open("w") as log:
        proc = subprocess.Popen(command, cwd=clone, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None  # stdout=PIPE
        for line in proc.stdout:
            log.write(f"{time.time():.3f} {line}")
            sys.stdout.write(line)
        log.write(f"{time.time():.3f} EXIT {proc.wait()}\n")
    return commit


def read_log(path: Path) -> list[str]:
    """A stamped log's lines, read through the bounded reader, undecodable bytes replaced."""
    try:
        data = readers.read_bytes(path, what=f"--log={str(path)!r}", expected="a stamped log", cap=LOG_CAP)
    except InputError as exc:
        raise SystemExit(f"bench/loop.py: {exc}") from None
    return data.decode(errors="replace").split("\n")[:-1] or [""]


def read_results(path: Path = RESULT) -> dict:
    """The results written so far ({} when none), read through the bounded reader."""
    if not os.path.lexists(path):
        return {}
    try:
        return json.loads(readers.read_text(path, what=str(path), expected="the results this script writes",
                                            cap=readers.DATA_CAP))
    except (InputError, ValueError) as exc:
        raise SystemExit(f"bench/loop.py: {exc}") from None


def table(entry: dict) -> str:
    rows = [(name, f"{s:.1f}") for name, s in entry["phases"].items()] + [("total", f"{entry['total_s']:.1f}")]
    width = max(len(n) for n, _ in rows)
    return "\n".join(f"{n:<{width}}  {s:>8}" for n, s in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("first", "ci"))
    parser.add_argument("--label", required=True, choices=("before", "after"))
    parser.add_argument("--log", type=Path, help="a stamped log of a run made by hand (default: run it now)")
    parser.add_argument("--commit", default="", help="the commit the log's run was made from (with --log)")
    args = parser.parse_args(argv)
    if args.log is None:
        log_path = Path(tempfile.mkstemp(prefix=f"torchpod-loop-{args.what}-", suffix=".log")[1])
        commit = run(args.what, log_path)
        print(f"stamped log: {log_path}")
    else:
        log_path, commit = args.log, args.commit or "unknown"
    entry = measure(args.what, read_log(log_path), commit)
    data = read_results()
    data.setdefault("host", "2-core x86_64, 24 GiB, no GPU")
    data.setdefault(args.what, {})[args.label] = entry
    RESULT.write_text(json.dumps(data, indent=2) + "\n")
    print(table(entry))
    if entry["exit"] != "0":
        print(f"bench/loop.py: the run exited {entry['exit']}; see the stamped log {log_path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
