#!/bin/sh
# payload.sh WHEELS [MOVE_TO]: the payload of a torchpod image, run by docker/Dockerfile.
#
# Makes the whole of /opt: a venv at /opt/venv (links to /usr/bin/python3: the same files for
# every arch, whose bases hold the Python of the Debian lock) and, in its site-packages,
# exactly the files of the image's lock, staged in WHEELS by torchpod_toolkit.wheelhouse:
# locked.txt (the lock's wheel lines, with their sha256) and built/ (wheels built on the host
# from the locked, hash-checked sdists of source-only packages). pip installs with
# --no-index --require-hashes: no network, and a file whose hash differs from the lock stops
# the build. pip itself is the lock's own pip wheel, run from the wheel file
# (`python3 pip-*.whl/pip`, as pip's documentation allows): the base needs no pip of its own.
#
# PIP_TARGET (the target's platform tags and Python, torchpod_toolkit.commands.pip_target)
# arrives as space-separated words and is expanded unquoted on purpose; `set -f` keeps any
# glob character literal, and build_command refuses a word with whitespace.
#
# Reproducible output: pip does not compile; compileall writes unchecked-hash .pyc files (no
# source time inside; the tree never changes in the image, and Python >= 3.7 reads them
# without stat-ing the source: PEP 552), then every file and directory gets one fixed time,
# so two builds from one lock give the same tree. compileall's exit status is ignored as pip
# ignores it: some wheels ship files that are not Python 3 (templates, tests).
#
# With MOVE_TO, /opt is moved to MOVE_TO/opt afterwards (a cross build copies it from there
# into the target's base); without, it stays where the image wants it (a native build's
# layer is this step's own).
set -euf
# nothing but compileall (which writes regardless) leaves a .pyc: a native build's layer is
# exactly what this script installs
export PYTHONDONTWRITEBYTECODE=1
# pip's and compileall's scratch files go under /opt, not /tmp: a file made and removed in
# /tmp gives /tmp the build's time, and a native build's layer (this step's whole diff) would
# carry that directory, different in every build
export TMPDIR=/opt/.payload-tmp
mkdir -p "$TMPDIR"
wheels=$1
pip=$(find "$wheels" -maxdepth 1 -name 'pip-*-py3-none-any.whl')
[ -f "$pip" ] || { echo "payload: expected one pip wheel in the staged lock; found: ${pip:-none}" >&2; exit 1; }
python3 -m venv --without-pip /opt/venv
site=/opt/venv/lib/python${PYTHON_VERSION}/site-packages
export PIP_CONFIG_FILE=/dev/null PIP_ROOT_USER_ACTION=ignore PIP_NO_CACHE_DIR=1
# One pip per core, each over a shard of the lock of about equal bytes (shards.py says how),
# each into a folder of its own; their trees are then merged into site-packages, the same
# files one pip would have written (a file two wheels write differently stops the build).
here=$(dirname "$0")
lists=$(python3 "$here/shards.py" split "$wheels/locked.txt" "$wheels" "$(nproc)" "$TMPDIR/shards")
pids="" trees=""
for list in $lists; do
  tree="$TMPDIR/shard-$(basename "$list" .txt)"
  # shellcheck disable=SC2086  # PIP_TARGET is words, split on purpose (see above)
  python3 "$pip/pip" install --disable-pip-version-check --progress-bar off \
    --no-index --find-links "$wheels" --no-deps --require-hashes --no-compile --target "$tree" ${PIP_TARGET} \
    -r "$list" &
  pids="$pids $!" trees="$trees $tree"
done
failed=0
for pid in $pids; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || { echo "payload: pip could not install the lock (its error is above)" >&2; exit 1; }
# shellcheck disable=SC2086  # the shards' folders: words with no space, made above
python3 "$here/shards.py" merge "$site" $trees
if [ -s "$wheels/built/built.txt" ]; then
  python3 "$pip/pip" install --disable-pip-version-check --progress-bar off \
    --no-index --find-links "$wheels/built" --no-deps --no-compile --target "$site" -r "$wheels/built/built.txt"
fi
rm -rf "${site:?}/bin"
python3 -m compileall -q -j0 --invalidation-mode unchecked-hash "$site" >/dev/null || true
rm -rf "$TMPDIR"
tree=/opt
if [ -n "${2:-}" ]; then
  mkdir -p "$2"
  mv /opt "$2/opt"
  tree=$2/opt
fi
find "$tree" -exec touch -h -d @0 {} +
