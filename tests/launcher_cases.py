"""Shared helpers for the launcher's unit tests: scheduler fixtures (YAML, loaded once and
validated), a resolver call from a dict, and torch's own parser as the judge of argv.

A fixture either spells a node's environment out (``env``: hand-edited or broken ones, edge
cases of one variable) or renders it from the model the containers-as-nodes harness runs
(``model``: torchpod_toolkit.cluster.topology, one node of a job with real-world names),
with ``env`` then adding variables or removing them (a null value)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import ClassVar, Mapping, Sequence

import pytest
import yaml

from torchpod.errors import InputError
from torchpod.resolve import resolve
from torchpod.schedulers.common import Facts
from torchpod.stacks import SHIM_DIR
from torchpod.torchrun_flags import split_command_line
from torchpod_toolkit.cluster import topology
from torchpod_toolkit.cluster.nodes import fill_ips

from paths import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "schedulers.yaml"
_KEYS = {"source", "hostname", "env", "files", "argv", "expect", "error", "notes_contain", "model"}
_MODEL_KEYS = {"scenario", "nodes", "node", "job", "hosts", "number", "nproc", "port", "node0_ip", "node_ips",
               "host_network"}
_EXPECT_KEYS = {
    "scheduler", "nnodes", "node_rank", "nproc_per_node", "rdzv_backend", "rdzv_endpoint",
    "rdzv_id", "rdzv_conf", "local_addr", "max_restarts", "is_host", "hosts",
}


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    hostname: str
    env: Mapping[str, str | None]
    files: Mapping[str, str]
    argv: tuple[str, ...]
    expect: Mapping[str, object] | None
    error: str | None
    notes_contain: str | None


def _render(name: str, model: dict) -> tuple[str, dict[str, str], dict[str, str]]:
    """(hostname, env, files) of one node of the model's job."""
    bad = set(model) - _MODEL_KEYS
    if bad or not {"scenario", "nodes", "node", "job"} <= set(model):
        raise ValueError(f"{FIXTURES}: {name}: model needs scenario, nodes, node, job "
                         f"(and may have {sorted(_MODEL_KEYS)}); got {sorted(model)}")
    topo = topology.build(model["scenario"], model["nodes"], model["job"], nproc=model.get("nproc"),
                          port=model.get("port", 23456), hosts=model.get("hosts"),
                          job_number=model.get("number"), host_network=model.get("host_network", False))
    node = topo.nodes[model["node"]]
    ips = model.get("node_ips") or [model.get("node0_ip", "10.0.0.10")] + [f"10.0.0.{11 + i}" for i in
                                                                          range(model["nodes"] - 1)]
    env = {k: fill_ips(v, ips) for k, v in node.env}
    return node.hostname, env, {path.lstrip("/"): fill_ips(text, ips) for path, text in node.files}


def _load() -> dict[str, Case]:
    data = yaml.safe_load(FIXTURES.read_text())
    cases = {}
    for name, entry in data.items():
        unknown = set(entry) - _KEYS
        if unknown:
            raise ValueError(f"{FIXTURES}: {name}: unknown keys {sorted(unknown)}")
        needed = ("source",) if "model" in entry else ("source", "hostname", "env")
        for key in needed:
            if key not in entry:
                raise ValueError(f"{FIXTURES}: {name}: missing key {key!r}")
        hostname, env, files = entry.get("hostname"), {}, {}
        if "model" in entry:
            hostname, env, files = _render(name, entry["model"])
            hostname = entry.get("hostname", hostname)
        if ("expect" in entry) == ("error" in entry):
            raise ValueError(f"{FIXTURES}: {name}: needs exactly one of expect / error")
        bad = set(entry.get("expect") or {}) - _EXPECT_KEYS
        if bad:
            raise ValueError(f"{FIXTURES}: {name}: unknown expect keys {sorted(bad)}")
        for key, value in (entry.get("env") or {}).items():
            if value is None and "model" in entry:
                env.pop(key, None)  # the model sets it; this case has it unset
            elif not isinstance(value, str):
                raise ValueError(f"{FIXTURES}: {name}: env {key} must be a string, got {value!r}")
            else:
                env[key] = value
        # the model's absolute paths (PBS_NODEFILE) live under the case's temp root
        env = {k: (f"{{root}}/{v.lstrip('/')}" if v.lstrip("/") in files else v) for k, v in env.items()}
        cases[name] = Case(
            name=name,
            source=entry["source"],
            hostname=hostname,
            env=env,
            files={**files, **(entry.get("files") or {})},
            argv=tuple(str(a) for a in entry.get("argv") or ()),
            expect=entry.get("expect"),
            error=entry.get("error"),
            notes_contain=entry.get("notes_contain"),
        )
    return cases


CASES = _load()
GOOD = [c for c in CASES.values() if c.expect is not None]
BAD = [c for c in CASES.values() if c.error is not None]


def materialise(case: Case, root: Path) -> tuple[dict[str, str], Facts]:
    """Write the case's files under ``root``; return its env and facts."""
    for rel, text in case.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    env = {k: v.replace("{root}", str(root)) for k, v in case.env.items()}
    facts = Facts(hostname=case.hostname, root=root, sysfs_root=root / "sys")
    return env, facts


# What every plan adds whatever the node: the stack-dump shim first on the workers' PYTHONPATH
# (torchpod.stacks), so that a test of what a node's fabric or scheduler adds can leave it out.
SHIM_PATH = ("PYTHONPATH", str(SHIM_DIR))


# what every plan adds whatever the node: the hang watch's window (its default) and torch's
# flight recorder (torchpod.watch)
WATCH_ENV = {("TORCHPOD_STALL_WINDOW", "300"), ("TORCH_FR_BUFFER_SIZE", "2000")}


def added_by_node(env_pairs) -> dict[str, str]:
    """A plan's env without what every plan adds: the shim's PYTHONPATH (when the caller had
    none) and WATCH_ENV."""
    return {k: v for k, v in env_pairs if (k, v) != SHIM_PATH and (k, v) not in WATCH_ENV}


def plan_for(env, argv=(), facts: Facts | None = None, script="train.py"):
    inv = split_command_line([*argv, script] if script else list(argv))
    return resolve(env, facts or Facts(hostname="testhost", root=Path("/nonexistent"),
                                       sysfs_root=Path("/nonexistent/sys")), inv)


def torch_accepts(args: list[str]) -> None:
    """Fail unless torch's own launcher parser and config helpers accept ``args``."""
    from torch.distributed.elastic.rendezvous.utils import (
        _parse_rendezvous_config,
        parse_rendezvous_endpoint,
    )
    from torch.distributed.run import get_args_parser, parse_min_max_nnodes

    try:
        ns = get_args_parser().parse_args([*args, "train.py"])
    except SystemExit as exc:  # argparse reports and exits
        raise AssertionError(f"torch's parser rejected {args}") from exc
    lo, hi = parse_min_max_nnodes(ns.nnodes)
    if not 0 < lo <= hi:
        raise AssertionError(f"nnodes {ns.nnodes}")
    if int(ns.max_restarts) < 0:
        raise AssertionError(f"max_restarts {ns.max_restarts}")
    _parse_rendezvous_config(ns.rdzv_conf)
    parse_rendezvous_endpoint(ns.rdzv_endpoint, 29400)
    if ns.nproc_per_node not in ("auto", "cpu", "gpu", "xpu") and int(ns.nproc_per_node) < 1:
        raise AssertionError(f"nproc_per_node {ns.nproc_per_node}")
    if ns.rdzv_id in ("", "none"):
        raise AssertionError("rdzv_id must be stable per job, never 'none'")


# --- one detector module at a time (tests/unit/torchpod/schedulers/test_<name>.py) --------
# Fields a Detection shares with the plan's JSON; each is compared where the detector gives
# a value and no command-line option could have replaced it (resolve's decide_* steps).
_DETECTION_FIELDS = ("nnodes", "node_rank", "rdzv_endpoint", "rdzv_id", "hosts", "local_addr",
                     "nproc_per_node", "rdzv_backend", "max_restarts")


def user_options(env: Mapping[str, str], argv: tuple[str, ...] = ()):
    """The user's options as resolve() reads them (torchpod.options), for a detector's call."""
    from torchpod.options import read_user_options

    return read_user_options(env, split_command_line([*argv, "train.py"]))


def good_cases_of(name: str) -> list[Case]:
    """The fixtures whose plan names scheduler ``name``."""
    return [c for c in GOOD if c.expect.get("scheduler") == name]


def bad_cases_of(name: str) -> list[Case]:
    """The broken fixtures that reach scheduler ``name``'s detect (chosen for their env)."""
    from torchpod.errors import InputError
    from torchpod.schedulers import choose, refuse_torchrun_worker

    found = []
    for case in BAD:
        env = {k: v.replace("{root}", "/nonexistent") for k, v in case.env.items()}
        try:
            refuse_torchrun_worker(env)
            module, _ = choose(env, user_options(env, case.argv))
        except InputError:
            continue  # refused before any detector (a torchrun worker, argv, two markers)
        if module.NAME == name:
            found.append(case)
    return found


def detect_directly(module, case: Case, root: Path):
    """``module``'s own claims() and detect() on the case, with no other step of resolve():
    (the Detection, the user's options)."""
    env, facts = materialise(case, root)
    user = user_options(env, case.argv)
    assert module.claims(env, user), f"{module.NAME} does not claim {case.name}"
    return module.detect(env, facts, user), user


def assert_detect_refuses(module, case: Case, root: Path, refused_later) -> None:
    """A broken fixture that reaches ``module``: claimed, then refused by its detect() in one
    line holding the fixture's error; or, named in ``refused_later``, detected and left to a
    later step of resolve() to refuse."""
    env, facts = materialise(case, root)
    user = user_options(env, case.argv)
    assert module.claims(env, user), f"{module.NAME} does not claim {case.name}"
    if case.name in refused_later:
        assert module.detect(env, facts, user).scheduler == module.NAME
        return
    try:
        module.detect(env, facts, user)
    except InputError as exc:
        assert case.error in str(exc)
        assert "\n" not in str(exc)
    else:
        raise AssertionError(f"{module.NAME}.detect accepted the broken fixture {case.name}")


Given = Mapping[str, str] | tuple[Mapping[str, str], tuple[str, ...]]


def _env_and_argv(given: Given) -> tuple[Mapping[str, str], tuple[str, ...]]:
    return given if isinstance(given, tuple) else (given, ())


class DetectorCases:
    """The checks every detector's own test file runs, driven by the table of cases that
    file's class declares (``class TestSlurm(DetectorCases)``; pytest collects the class
    there, never here, as its name does not start with ``Test``):

    ``detector``       the module under test;
    ``claims``         environments its claims() takes: a dict, or (env, argv) for flags;
    ``not_claims``     environments its claims() leaves to the next detector;
    ``refused_later``  broken fixtures that reach it but are refused by a later step of
                       resolve(), each with that step (tests/unit/torchpod/test_schedulers.py
                       checks their messages there).

    Its own claims() and detect() are called directly, on the shared fixtures
    (tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that
    reach it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole
    of resolve(). A detector for which one check has no cases sets that test to None, with
    the reason, so that no check runs on an empty table."""

    detector: ClassVar[ModuleType]
    claims: ClassVar[Sequence[Given]] = ()
    not_claims: ClassVar[Sequence[Given]] = ()
    refused_later: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def fixtures(cls) -> tuple[list[Case], list[Case]]:
        """The good fixtures whose plan names the detector, and the broken ones that reach it."""
        return good_cases_of(cls.detector.NAME), bad_cases_of(cls.detector.NAME)

    @classmethod
    def tables(cls) -> dict[str, tuple[str, list, list[str]]]:
        """Each table-driven test's parameter names, values and ids, by test name."""
        good, bad = cls.fixtures()
        claims = [_env_and_argv(g) for g in cls.claims]
        not_claims = [_env_and_argv(g) for g in cls.not_claims]
        return {
            "test_detect_alone_gives_the_fixtures_plan": ("case", good, [c.name for c in good]),
            "test_detect_refuses_a_broken_environment_in_one_line": ("case", bad, [c.name for c in bad]),
            "test_claims_on_its_markers": ("env, argv", claims, [f"env{i}" for i in range(len(claims))]),
            "test_does_not_claim_without_them":
                ("env, argv", not_claims, [f"env{i}" for i in range(len(not_claims))]),
        }

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        # pytest asks a test class for the parameters of each of its tests (its own hook)
        table = type(self).tables().get(metafunc.function.__name__)
        if table is not None:
            names, values, ids = table
            metafunc.parametrize(names, values, ids=ids)

    def test_it_has_fixtures_of_both_kinds(self):
        good, bad = self.fixtures()
        assert good, "add a fixture this detector resolves"
        assert bad, "add a broken fixture that reaches this detector"
        assert set(self.refused_later) <= {c.name for c in bad}

    def test_detect_alone_gives_the_fixtures_plan(self, case, tmp_path):
        det, user = detect_directly(self.detector, case, tmp_path)
        assert_detection_matches(det, user, case)

    def test_detect_refuses_a_broken_environment_in_one_line(self, case, tmp_path):
        assert_detect_refuses(self.detector, case, tmp_path, self.refused_later)

    def test_claims_on_its_markers(self, env, argv):
        assert self.detector.claims(env, user_options(env, argv))

    def test_does_not_claim_without_them(self, env, argv):
        assert not self.detector.claims(env, user_options(env, argv))


class ForwardedDetectorCases(DetectorCases):
    """A detector whose variables a job script forwards into a container
    (contract.SCHEDULER_VARS), with ``prefixes``, the prefixes of its variables' names: the
    checks of every detector, and two more: run on every fixture that reaches it, claims() and
    detect() look up no name outside its READS and the TORCHPOD_* settings; and every variable
    name with one of its prefixes written in the module's source is in READS, and every READS
    name is written there (a name read through a helper still has to be named in the module)."""

    prefixes: ClassVar[tuple[str, ...]]

    @classmethod
    def tables(cls) -> dict[str, tuple[str, list, list[str]]]:
        good, bad = good_cases_of(cls.detector.NAME), bad_cases_of(cls.detector.NAME)
        both = good + bad
        return {**super().tables(),
                "test_detect_reads_only_the_variables_the_contract_names": ("case", both, [c.name for c in both])}

    def test_detect_reads_only_the_variables_the_contract_names(self, case, tmp_path):
        from torchpod.contract import SETTINGS

        module = self.detector
        env, facts = materialise(case, tmp_path)
        recorded = RecordingEnv(env)
        user = user_options(env, case.argv)
        try:
            if module.claims(recorded, user):
                module.detect(recorded, facts, user)
        except InputError:
            pass
        extra = recorded.read - set(module.READS) - {s.name for s in SETTINGS}
        assert not extra, f"{module.NAME} read {sorted(extra)}, which contract.SCHEDULER_VARS does not name"

    def test_every_variable_named_in_the_module_is_in_reads(self):
        import ast
        import inspect

        module = self.detector
        tree = ast.parse(inspect.getsource(module))
        named = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and n.value.startswith(self.prefixes) and n.value.replace("_", "").isalnum()
                 and n.value.isupper()}
        assert named == set(module.READS), (sorted(named - set(module.READS)), sorted(set(module.READS) - named))


# A user's option that replaces each field after detection (resolve's decide_* steps).
_REPLACED_BY = {"rdzv_endpoint": ("rdzv_endpoint", "master_addr", "master_port"),
                "rdzv_id": ("rdzv_id", "rdzv_id_none")}


def assert_detection_matches(det, user, case: Case) -> int:
    """The detector alone already gives the fixture's expected values: each one it gives
    and no option of the user's (flag or PET_*) replaces later. Returns how many it compared."""
    assert det.scheduler == case.expect["scheduler"]
    compared = 0
    for key in _DETECTION_FIELDS:
        got = getattr(det, key)
        if key not in case.expect or got is None:
            continue
        if any(getattr(user, name, None) is not None for name in _REPLACED_BY.get(key, (key,))):
            continue
        want = case.expect[key]
        if isinstance(got, tuple):
            got = list(got)
        elif not isinstance(got, (int, str)):
            got = str(got)
        assert got == want, (case.name, key, got, want)
        compared += 1
    return compared


class RecordingEnv(Mapping[str, str]):
    """An environment that records every name looked up in it; ``*`` when it is iterated."""

    def __init__(self, env: Mapping[str, str]):
        self._env, self.read = dict(env), set()

    def __getitem__(self, name: str) -> str:
        self.read.add(name)
        return self._env[name]

    def get(self, name, default=None):
        self.read.add(name)
        return self._env.get(name, default)

    def __contains__(self, name) -> bool:
        self.read.add(name)
        return name in self._env

    def __iter__(self):
        self.read.add("*")
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)
