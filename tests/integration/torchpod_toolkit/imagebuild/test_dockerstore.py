"""dockerstore.py run by path, as setup.sh runs it before anything is installed: no
PYTHONPATH, no site-packages, from another folder; it finds the launcher's bounded reader
beside the toolkit and sweeps the leaked folders of a store laid out as moby lays it out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from paths import ROOT


def test_it_runs_by_path_before_anything_is_installed(tmp_path):
    db = tmp_path / "image" / "overlay2" / "layerdb" / "sha256" / "chain1"
    db.mkdir(parents=True)
    (db / "cache-id").write_text("3cd3ii60yn6qi6cl5i3zb5e5h")
    for i, name in enumerate(("3cd3ii60yn6qi6cl5i3zb5e5h", "17qcgnce88g2barbybt734ykz")):
        (tmp_path / "overlay2" / name / "diff").mkdir(parents=True)
        (tmp_path / "overlay2" / name / "link").write_text(f"SHORT{i:021d}")
    script = ROOT / "toolkit" / "torchpod_toolkit" / "imagebuild" / "dockerstore.py"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-S", "-I", str(script), str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    assert "1 layer folders" in done.stdout, done.stdout
    assert sorted(p.name for p in Path(tmp_path / "overlay2").iterdir()) == ["3cd3ii60yn6qi6cl5i3zb5e5h"]
