"""The watch thread in every worker: beats, judging, evidence, the verdict file.

Started by torchpod's sitecustomize (torchpod/shim) in each worker `torchpod run` armed,
when TORCHPOD_STALL_WINDOW holds a window. It imports nothing of torch itself: it waits
until the script has initialised torch.distributed, then every PERIOD:

1. beats: the default group's collective sequence number (its process group's counter,
   the ``collective_seq_id`` torch's flight recorder stamps), with the op and sizes of that
   collective from the flight recorder (``_dump_fr_trace_json``, armed by
   TORCH_FR_BUFFER_SIZE, which the launcher sets unless the job did; torch 2.13 records
   gloo's collectives as NCCL's) once the number stands still between two beats, written as
   ``beat/<rank>`` in the job's store. A training job's number moves every beat, so its
   beats read no dump: the dump (a JSON text of the whole buffer, about a megabyte and
   40 ms of CPU for 2,000 collectives) is read where a hang is possible, not every beat;
2. judges, on rank 0 (rank 1 while rank 0's beat is silent): reads every beat into a
   torchpod.watch.judge.Judge and, on a suspicion, claims ``hang`` (compare_set: one
   claim per job);
3. answers a claim: writes its evidence beside its stack dumps (every thread's Python stack
   and the whole flight-recorder dump, ``rank-R.pid-P.hang.txt`` and ``.fr.json``) and its
   report (its main thread's innermost frame outside the interpreter and its packages) as
   ``report/<rank>``;
4. the claiming rank waits up to GATHER_S for every report, words the verdict and writes
   it as ``verdict``, with the evidence bundle (every report) in its own folder;
5. every rank that reads the verdict writes it as ``verdict.json`` in its folder and stops:
   `torchpod run` on its node (torchpod.watch.node) prints it and ends the job.

Every ARRIVALS_EVERY beats each rank also sends the wall-clock stamps of the collectives it
entered since its last message (``arrive/<rank>``, torchpod.watch.straggle), and rank 0 names
the rank that keeps the others waiting while it does, and over the whole run when its
worker exits.

The store is the job's own: a client of its own on MASTER_ADDR:MASTER_PORT, which torchrun
gives every worker (the rendezvous store's host under c10d, rank 0's store otherwise), under
a prefix of the run id and restart count, so an earlier attempt's keys are never read. The
thread is a daemon, catches everything, and a store that cannot be reached leaves the rank
unwatched with one line, never a failed worker: watching must not break training.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import threading
import time
import traceback
from datetime import timedelta
from typing import Any

from .. import frames as frames_mod
from ..contract import ENV_HOSTNAME, ENV_STACKS_DIR, ENV_STALL_WINDOW, setting
from ..errors import InputError
from . import judge, straggle

GATHER_S = 20.0  # the longest the claiming rank waits for the reports
DELIVER_S = 10.0  # the longest a rank waits for the others to have read the verdict
FIRST_LOOK_S = 0.2  # how often a worker looks for the script's init_process_group
STORE_TIMEOUT_S = 10.0
ARRIVALS_EVERY = 6  # beats between two arrivals messages: 30 s at the default window


def period(window_s: int) -> float:
    """Seconds between beats: a tenth of the window, between 1 and 5."""
    return min(5.0, max(1.0, window_s / 10))


def innermost(frames: traceback.StackSummary) -> str:
    """The innermost frame that is the user's own (torchpod.frames), as file:line in
    function; the innermost of all where no frame is."""
    chosen = next((f for f in reversed(frames) if frames_mod.users(f.filename)), frames[-1] if frames else None)
    if chosen is None:
        return "no Python frame"
    return f"{chosen.filename}:{chosen.lineno} in {chosen.name}"[:2 * judge.TEXT_CAP]


def last_collective(dump: dict[str, Any]) -> tuple[int, str, str]:
    """The default group's highest collective in a flight-recorder dump: (seq, op, sizes)."""
    best: tuple[int, str, str] = (0, "", "")
    for entry in straggle.default_group(dump):
        seq = entry.get("collective_seq_id")
        if isinstance(seq, int) and not isinstance(seq, bool) and seq > best[0]:
            sizes = json.dumps(entry.get("input_sizes"), separators=(",", ":"))[:judge.TEXT_CAP]
            best = (seq, str(entry.get("profiling_name") or "")[:judge.TEXT_CAP], sizes)
    return best


class Watch:
    """One worker's watch: its place in the job and its store."""

    def __init__(self, env: dict[str, str], window_s: int, folder: str):
        self.rank, self.world = int(env["RANK"]), int(env["WORLD_SIZE"])
        self.window_s, self.folder = window_s, folder
        self.host = setting(env, ENV_HOSTNAME) or socket.gethostname()
        self.job = f"{env.get('TORCHELASTIC_RUN_ID', '')}.{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"[:200]
        self.addr, self.port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
        self.stem = os.path.join(folder, f"rank-{self.rank}.pid-{os.getpid()}")
        self.n = 0
        self._seen: int | None = None
        self.store: Any = None
        self.stopping = threading.Event()
        self.detail: tuple[int, str, str] = (0, "", "")  # the last collective read from a dump
        self.sent = 0  # the newest collective whose arrival this rank sent
        self.stragglers = straggle.Stragglers(self.world) if self.rank == 0 else None

    # --- torch, only once the script imported it -------------------------------------------
    def initialised(self) -> bool:
        """Whether the script's process group is up; False while torch.distributed is still
        being imported (it is in sys.modules, partly initialised, before it defines
        is_initialized)."""
        dist = sys.modules.get("torch.distributed")
        try:
            return bool(dist is not None and dist.is_available() and dist.is_initialized())
        except AttributeError:
            return False

    def connect(self) -> None:
        from torch.distributed import PrefixStore, TCPStore

        client = TCPStore(self.addr, self.port, is_master=False, wait_for_workers=False,
                          timeout=timedelta(seconds=STORE_TIMEOUT_S))
        self.store = PrefixStore(f"torchpod/watch/{self.job}/", client)

    def dump(self) -> bytes:
        from torch._C._distributed_c10d import _dump_fr_trace_json  # type: ignore[attr-defined]

        return _dump_fr_trace_json()

    def recorder(self) -> dict[str, Any]:
        """The flight recorder's dump as an object; empty where it is not a JSON object (a
        torch whose dump has another form is read as recording nothing)."""
        try:
            value = json.loads(self.dump())
        except (ValueError, UnicodeDecodeError, RecursionError):
            return {}
        return value if isinstance(value, dict) else {}

    # --- the store ---------------------------------------------------------------------------
    def _get(self, key: str) -> bytes | None:
        return bytes(self.store.get(key)) if self.store.check([key]) else None

    def sequence(self) -> int | None:
        """The default group's collective sequence number, without a dump; None where this
        torch's group does not say."""
        try:
            from torch.distributed import distributed_c10d

            return int(distributed_c10d._get_default_group()._get_sequence_number_for_group())
        except Exception:  # noqa: BLE001 - a torch without it beats from the dump
            return None

    def progress(self) -> tuple[int, str, str]:
        """(seq, op, sizes) of the newest collective entered; op and sizes only once the
        number stood still since the last beat (read from a dump, once per number)."""
        seq = self.sequence()
        if seq is not None and seq != self._seen:  # moving: a job at work
            self._seen = seq
            return self.detail if seq == self.detail[0] else (seq, "", "")
        self._seen = seq
        if seq is None or seq != self.detail[0]:
            read = last_collective(self.recorder())
            self.detail = read if seq is None or read[0] == seq else (seq, "", "")
        return self.detail

    def beat(self) -> None:
        self.n += 1
        seq, op, sizes = self.progress()
        self.store.set(f"beat/{self.rank}", judge.Beat(self.rank, self.host, self.n, seq, op, sizes,
                                                       self.job).encode())

    def arrive(self) -> None:
        """This rank's arrivals since its last message; on rank 0, the stragglers they close."""
        at = straggle.arrivals(self.recorder(), self.sent)
        if at:
            self.sent = at[-1][0]
        self.store.set(f"arrive/{self.rank}", straggle.Arrivals(self.rank, self.host, self.job, at).encode())
        if self.stragglers is None:
            return
        messages = [straggle.parse_arrivals(raw, self.job, self.world)[0] for raw in self.every("arrive")]
        for found in self.stragglers.feed(m for m in messages if m is not None):
            print(found.line(), file=sys.stderr, flush=True)

    def every(self, kind: str) -> list[bytes]:
        """Every rank's ``kind/<rank>`` key that is there: one request where all are."""
        keys = [f"{kind}/{r}" for r in range(self.world)]
        raws = self.store.multi_get(keys) if self.store.check(keys) else [self._get(k) for k in keys]
        return [bytes(raw) for raw in raws if raw is not None]

    def beats(self) -> dict[int, judge.Beat]:
        found = {}
        for raw in self.every("beat"):
            beat, _ = judge.parse_beat(raw, self.job, self.world)
            if beat is not None:
                found[beat.rank] = beat
        return found

    # --- evidence ----------------------------------------------------------------------------
    def _write(self, path: str, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)

    def answer(self) -> None:
        """Evidence beside the stack dumps, then this rank's report in the store."""
        frames = sys._current_frames()
        texts = [f"thread {ident}:\n{''.join(traceback.format_stack(f))}" for ident, f in frames.items()
                 if ident != threading.get_ident()]
        self._write(self.stem + ".hang.txt", "\n".join(texts).encode("utf-8", "replace"))
        self._write(self.stem + ".fr.json", self.dump())
        main = frames.get(threading.main_thread().ident or -1)
        stack = traceback.extract_stack(main) if main is not None else traceback.StackSummary()
        report = judge.Report(self.rank, self.host, os.getpid(), innermost(stack),
                              "".join(stack.format())[-judge.STACK_CAP:])
        self.store.set(f"report/{self.rank}", report.encode())

    def gather(self, found: judge.Suspicion) -> None:
        """The claiming rank: every report within GATHER_S (a culprit whose own beat stopped is
        not waited for: its thread cannot answer), then the verdict for all."""
        keys = [f"report/{r}" for r in range(self.world)]
        frozen = {c.rank for c in found.culprits if c.quiet}
        awaited = [k for r, k in enumerate(keys) if r not in frozen]
        deadline = time.monotonic() + GATHER_S
        while not self.store.check(awaited) and time.monotonic() < deadline:
            time.sleep(0.5)
        reports = {}
        for key in keys:
            raw = self._get(key)
            report, _ = judge.parse_report(raw, self.world) if raw is not None else (None, "")
            if report is not None:
                reports[report.rank] = report
        said = judge.lines(found, reports, self.world)
        bundle = {"suspicion": json.loads(found.encode()), "reports": [r.__dict__ for r in reports.values()],
                  "verdict": said}
        self._write(os.path.join(self.folder, "hang-bundle.json"), json.dumps(bundle, indent=1).encode())
        self.store.set("verdict", json.dumps({"lines": said, "judge": self.rank, "host": self.host,
                                              "answered": sorted(reports)}).encode())

    def deliver(self, raw: bytes) -> None:
        """The verdict into this node's folder, atomically, for `torchpod run` to read, once
        every rank that answered the claim has read it too (within DELIVER_S): the first node
        to stop its torchrun may be the one whose agent hosts the store, and a node that had
        not read the verdict by then could not read it any more. A store that fails meanwhile
        (that node stopped) ends the wait, never the delivery."""
        try:
            self.store.set(f"delivered/{self.rank}", b"1")
            awaited = [f"delivered/{r}" for r in judge.answered(raw, self.world)]
            deadline = time.monotonic() + DELIVER_S
            while not self.store.check(awaited) and time.monotonic() < deadline:
                time.sleep(0.2)
        except Exception:  # noqa: BLE001 - the store is gone: the verdict is still this node's
            pass
        tmp = os.path.join(self.folder, f".verdict.{self.rank}.{os.getpid()}")
        self._write(tmp, raw)
        os.replace(tmp, os.path.join(self.folder, "verdict.json"))

    # --- the loop ----------------------------------------------------------------------------
    def close(self, thread: threading.Thread) -> None:
        self.stopping.set()
        thread.join(timeout=STORE_TIMEOUT_S)
        for line in self.stragglers.summary() if self.stragglers is not None else ():
            print(line, file=sys.stderr, flush=True)

    def run(self) -> None:
        step = period(self.window_s)
        while not self.initialised():  # looked for often: the first beat soon after init
            if self.stopping.wait(FIRST_LOOK_S):
                return
        self.connect()
        judging = judge.Judge(self.world, self.window_s, time.monotonic()) if self.rank in (0, 1) else None
        answered = claimed = False
        while True:
            self.beat()
            if self.n % ARRIVALS_EVERY == 0 and not claimed and not answered:
                self.arrive()
            if judging is not None and not claimed:
                found = judging.feed(time.monotonic(), self.beats())
                acting = self.rank == 0 or 0 in judging.silent(time.monotonic())
                if found is not None and acting:
                    mine = found.encode()
                    claimed = bytes(self.store.compare_set("hang", "", mine)) == mine
                    if claimed:
                        self.answer()
                        answered = True
                        self.gather(found)
            raw = self._get("hang") if not answered else None
            if raw is not None:
                self.answer()
                answered = True
            verdict = self._get("verdict") if answered else None
            if verdict is not None:
                self.deliver(verdict)
                return
            if self.stopping.wait(step):
                return


def start(env: dict[str, str] | None = None) -> threading.Thread | None:
    """The watch thread of this worker, started; None where the job asked for none."""
    env = dict(os.environ if env is None else env)
    try:
        folder, window_s = env.get(ENV_STACKS_DIR, ""), judge.window(setting(env, ENV_STALL_WINDOW) or "off")
        watch = Watch(env, window_s, folder) if window_s is not None and folder else None
    except (KeyError, ValueError, InputError):
        return None  # the launcher checked the window; a worker torchrun did not start is not watched
    if watch is None:
        return None

    def guarded() -> None:
        try:
            watch.run()
        except Exception as exc:  # noqa: BLE001 - watching must never break training
            print(f"torchpod: rank {watch.rank}: the hang watch stopped: {type(exc).__name__}: {exc}"[:500],
                  file=sys.stderr, flush=True)

    thread = threading.Thread(target=guarded, name="torchpod-watch", daemon=True)
    thread.start()
    # stopped before the interpreter finalises: a daemon thread still inside a C++ call of
    # torch's (a store request) when the interpreter tears down would be unwound by
    # pthread_exit through C++ frames, which aborts the process on its way out
    atexit.register(watch.close, thread)
    return thread
