"""torchpod_toolkit.manifests.regenerate: the Regenerate line is written with every word
quoted for bash and read back into the same request; the reader takes exactly the quoting
the writer uses, and a malformed line, or a file without one, is refused in one line."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import regenerate
from torchpod_toolkit.manifests.spec import JobSpec, check

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def test_the_line_names_only_what_differs_from_the_defaults_and_reads_back():
    spec = check(JobSpec("slurm", 2, IMAGE, ("train.py", "--lr", "0.1"), name="run1"))
    line = regenerate.invoke_line(spec)
    assert line.startswith("invoke manifests --scheduler slurm ") and line.endswith(" -- train.py --lr 0.1")
    assert " --name run1 " in line and "--walltime" not in line
    assert check(regenerate.parse_invoke_line(line)) == spec


def test_the_first_regenerate_line_of_a_file_is_the_one_read():
    text = "#!/bin/bash\n# Regenerate: invoke manifests a\n# Regenerate: invoke manifests b\n"
    assert regenerate.regenerate_line(text) == "invoke manifests a"


@pytest.mark.parametrize("line, words", [
    ("a 'b c' d", ["a", "b c", "d"]),
    ("$'x\\ny' '' \"q r\"", ["x\ny", "", "q r"]),
    ("--x=$'\\u00e9'", ["--x=\u00e9"]),
])
def test_the_words_are_read_as_bash_reads_them(line, words):
    assert regenerate.split_words(line) == words


def test_a_line_that_is_not_one_line_is_refused():
    with pytest.raises(InputError, match="is not one line"):
        regenerate.parse_invoke_line("invoke manifests\n--scheduler slurm")


MALFORMED = [
    ("invoke manifests --scheduler slurm --nodes 2 --image 'x", "not closed"),
    ("invoke manifests --scheduler slurm --nodes 2 --image $'x", "not closed"),
    ("invoke build --scheduler slurm", "is not an `invoke manifests` line"),
    ("invoke manifests --scheduler slurm --nodes 2 --image i:1 --bogus 1 -- t.py", "unrecognized arguments"),
    ("invoke manifests --scheduler slurm --nodes abc --image i:1 -- t.py", "--nodes='abc'"),
    ("invoke manifests --scheduler slurm --nodes 2 --image i:1 -- $(touch P)", "is not quoted"),
    ('invoke manifests --scheduler slurm --nodes 2 --image i:1 -- "$HOME"', 'holds $'),
    ("invoke manifests --scheduler slurm --nodes 2 --image i:1 -- $'\\q'", "escape \\q"),
    ("invoke manifests --scheduler slurm --nodes 2 --image i:1 -- $'\\x4'", "bad escape"),
    ("invoke manifests --scheduler slurm --nodes 2 --image i:1 -- $'\\UFFFFFFFF'", "bad escape"),
    ("invoke manifests --nodes 2 --image i:1 -- t.py", "has no --scheduler"),
    ("invoke manifests --scheduler slurm --nodes 2 --image", "expected one argument"),
    ("invoke manifests --sched slurm --nodes 2 --image i:1", "unrecognized arguments"),
]


@pytest.mark.parametrize("line, needle", MALFORMED, ids=[n for _, n in MALFORMED])
def test_a_malformed_regenerate_line_is_one_line(line, needle):
    with pytest.raises(InputError) as err:
        regenerate.parse_invoke_line(line)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_file_without_a_regenerate_line_is_one_line():
    with pytest.raises(InputError, match="no '# Regenerate"):
        regenerate.regenerate_line("#!/bin/bash\n# Regenerate:invoke manifests\n")


def test_a_regenerate_line_after_a_unicode_line_separator_is_not_a_line():
    fake = "x\u2028# Regenerate: invoke manifests --scheduler slurm --nodes 9 --image i:1 -- evil.py"
    with pytest.raises(InputError, match="no '# Regenerate"):
        regenerate.regenerate_line(f"#!/bin/bash\ntorchpod run -- train.py '{fake}'\n")
