"""The peer, Compartment 4.13.0 (PyPI, Apache-2.0), in its own virtualenv under
~/.cache/memvault/bench/: made once, for `scripts/bench peer` and for the
test that imports one of its real exports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PEER = "compartment==4.13.0"


def peer_python() -> Path:
    """The Python of the peer's virtualenv, installed on first use (RuntimeError if pip fails)."""
    from memvault.index.model import cache_dir

    venv = cache_dir().parent / "bench" / PEER.replace("==", "-")
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        print(f"installing {PEER} into {venv} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", PEER], capture_output=True
        )
        if done.returncode:
            raise RuntimeError(f"could not install {PEER}:\n{done.stderr.decode()[-2000:]}")
        (venv / ".installed").write_text(PEER)
    return python
