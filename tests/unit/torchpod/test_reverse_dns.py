"""torchpod.reverse_dns: the reverse lookup c10d makes of a node's address, timed under a
bound of its own; a row for the doctor only when the answer is slow or missing."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from torchpod import doctor, reverse_dns
from torchpod.fabric.findings import Severity


def test_the_lookup_asks_for_the_address_as_a_dual_stack_listener_sees_it_name_required():
    asked = []

    def resolve(where, flags):
        asked.append((where, flags))
        return ("node-3.job.ns.svc.cluster.local", "0")

    found = reverse_dns.lookup("10.1.2.3", resolve=resolve)
    assert asked == [(("::ffff:10.1.2.3", 0, 0, 0), socket.NI_NAMEREQD)]
    assert found.answer == "node-3.job.ns.svc.cluster.local" and 0 <= found.seconds < reverse_dns.SLOW_S
    assert reverse_dns.finding(found) is None


def test_a_prompt_refusal_costs_nothing_and_is_no_row():
    def resolve(_where, _flags):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    found = reverse_dns.lookup("10.1.2.3", resolve=resolve)
    assert found.answer.startswith("error: ") and reverse_dns.finding(found) is None


def test_a_resolver_that_waits_out_its_timeout_is_a_warning_naming_the_cost():
    def resolve(_where, _flags):  # glibc after its 5 s, twice: EAI_AGAIN, here shortened
        time.sleep(reverse_dns.SLOW_S + 0.1)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    found = reverse_dns.lookup("10.1.2.3", resolve=resolve)
    row = reverse_dns.finding(found)
    assert row is not None and row.code == "doctor.reverse-dns.slow" and row.severity is Severity.WARN
    assert "10.1.2.3 took 1." in row.message and "Temporary failure" in row.message and "c10d" in row.message
    assert "RES_OPTIONS" in row.fix


def test_a_resolver_that_never_answers_is_left_behind_at_the_bound():
    release = threading.Event()

    def resolve(_where, _flags):
        release.wait(60)
        return ("late", "0")

    start = time.monotonic()
    found = reverse_dns.lookup("10.1.2.3", bound=0.3, resolve=resolve)
    release.set()
    assert found.seconds is None and time.monotonic() - start < 5  # a hang guard, not a figure
    row = reverse_dns.finding(found, bound=0.3)
    assert row is not None and "no answer within 0.3 s" in row.message


def test_an_address_that_does_not_resolve_is_none(monkeypatch):
    def fail(_name):
        raise socket.gaierror(socket.EAI_NONAME, "no such host")

    monkeypatch.setattr(socket, "gethostbyname", fail)
    assert reverse_dns.own_address() is None


@pytest.mark.parametrize("seconds, rows", [(0.01, []), (None, ["reverse-dns"]), (12.0, ["reverse-dns"])])
def test_the_doctor_shows_the_row_only_when_the_lookup_costs_time(tmp_path, seconds, rows):
    machine = doctor.Machine(sysfs_root=tmp_path, root=tmp_path, gpu_count=1,
                             reverse_dns=reverse_dns.Lookup("10.1.2.3", seconds, "error: timeout"))
    _, checks = doctor.preflight({}, machine)
    assert [c.name for c in checks if c.name == "reverse-dns"] == rows
    assert all(c.finding.severity is Severity.WARN for c in checks if c.name == "reverse-dns")
