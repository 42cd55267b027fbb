"""CI refuses to run without ../shared/data, so a green run means the real-data tests ran."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_run_stops_first_when_the_shared_data_is_missing(tmp_path):
    repo = tmp_path / "checkout"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", repo / ".ci" / "run")
    # no ../shared/data beside the checkout, and no requirements file: had the script gone past
    # the check it would fail later with pip's message instead of this one
    out = subprocess.run(["bash", str(repo / ".ci" / "run")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert out.stderr.startswith("error: ../shared/data is missing")
    assert "pip" not in out.stdout + out.stderr
