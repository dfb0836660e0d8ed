"""Issue 9: onnxruntime's telemetry must never run ("nothing leaves the machine")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model  # the real embedding model

EMBED = "from memvault.index.embedder import Embedder; print(Embedder().embed(['hi']).shape)"


def test_embedding_creates_no_onnxruntime_telemetry_files(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "ORT_DISABLE_TELEMETRY")
    }
    env["HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", EMBED], env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert b"(1, 384)" in done.stdout
    assert not (home / ".cache" / "Microsoft").exists()
    created = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert created, "the model cache should have been built under HOME"
    assert all(p == ".cache" or p.startswith(".cache/memvault") for p in created), created


def test_telemetry_is_forced_off_even_if_the_environment_enables_it(tmp_path):
    env = dict(os.environ, ORT_DISABLE_TELEMETRY="0", HOME=str(tmp_path))
    code = "import memvault, os; print(os.environ['ORT_DISABLE_TELEMETRY'])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    assert done.stdout.strip() == b"1", done.stderr
    assert not Path(tmp_path, ".cache", "Microsoft").exists()
