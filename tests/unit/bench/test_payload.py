"""bench/payload.py: the lines its container prints, read back into a run's seconds, tree digest
and path count, and any other output refused in one line."""

from __future__ import annotations

import pytest

from paths import bench_script

DIGEST = "0123456789abcdef" * 4


@pytest.fixture(scope="module")
def payload():
    return bench_script("payload")


def test_the_scripts_lines_give_the_seconds_the_digest_and_the_count(payload):
    out = f"pip noise\nseconds 100.25 137.75\ntree {DIGEST} 41234\n"
    assert payload.parse_run(out) == (37.5, DIGEST, 41234)


@pytest.mark.parametrize("out", [
    "",  # the container printed nothing
    "sh: /srv/payload.sh: not found\n",
    f"tree {DIGEST} 12\n",  # no seconds line
    "seconds 1 2\n",  # no tree line
    f"seconds 1 two\ntree {DIGEST} 12\n",
    f"seconds 5 2\ntree {DIGEST} 12\n",  # ends before it starts
    "seconds 1 2\ntree abc 12\n",  # no sha256
    f"seconds 1 2\ntree {DIGEST}\n",
    f"seconds 1 2\ntree {DIGEST} many\n",
    "seconds 1 2\ntree " + "\x1b[2J" * 16 + " 12\n",
])
def test_output_without_the_scripts_lines_is_one_line(payload, out):
    with pytest.raises(SystemExit) as stopped:
        payload.parse_run(out)
    message = str(stopped.value)
    assert message.startswith("bench/payload.py: the payload container printed no ")
    assert "\n" not in message and "\x1b" not in message
