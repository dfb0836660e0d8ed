"""Shared fixtures: real vault files in temporary directories, real crypto.

Tests use cheap Argon2id parameters (8 MiB, one pass) so that the suite
stays fast; everything else is the production code path.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from memvault.crypto import KdfParams
from memvault.vault import Vault, clock


def fuse_unavailable() -> str | None:
    """Why real mounts cannot run here, in one line (None: they can)."""
    if not os.path.exists("/dev/fuse"):
        return "FUSE is not available here: /dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "FUSE is not available here: fusermount3 is missing (scripts/setup installs fuse3)"
    return None


def model_unavailable() -> str | None:
    """Why the embedding model cannot be used here, in one line (None: it can)."""
    from memvault.index.model import ModelMissing, package_dir

    try:
        package_dir()
    except ModelMissing as exc:
        return f"the embedding model is not installed ({exc})"
    return None


def pytest_configure(config) -> None:
    """Ctrl-C as a terminal delivers it, however the suite was started.

    A shell starts a background job (`scripts/test &`, nohup) with SIGINT
    ignored, and every process it starts inherits that: the commands the
    tests interrupt would then rightly ignore the SIGINT and the tests of
    what Ctrl-C does would fail for the launcher's sake. A handler, unlike
    SIG_IGN, does not survive exec, so the children start with the default.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items) -> None:
    """Mount tests and tests marked `model` say in one line what is missing, if anything."""
    fuse, model = fuse_unavailable(), model_unavailable()
    for item in items:
        if fuse and "mount" in item.path.parent.name:
            item.add_marker(pytest.mark.skip(reason=fuse))
        if model and item.get_closest_marker("model"):
            item.add_marker(pytest.mark.skip(reason=model))


FAST_KDF = KdfParams(time_cost=1, memory_kib=8 * 1024, parallelism=1)
PASSPHRASE = b"correct horse battery staple"
KDF_ARGS = ["--kdf-time", "1", "--kdf-memory", "8", "--kdf-parallelism", "1"]


@pytest.fixture(autouse=True)
def machine_state(tmp_path_factory):
    """Each test its own machine: what it saw of its vaults (rollback.py) is
    recorded in a directory of its own, inherited by the commands it runs (its
    own patch: a test's monkeypatch.undo() leaves it)."""
    state = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state))
        yield state


def forget_vaults_seen() -> None:
    """This machine forgets the vaults it saw: for a test that puts an older copy
    of a vault back on purpose (the rollback check is tested on its own)."""
    shutil.rmtree(Path(os.environ["XDG_STATE_HOME"]) / "memvault", ignore_errors=True)


@pytest.fixture
def vault_path(tmp_path: Path) -> Path:
    return tmp_path / "vaultdir" / "memory.vault"


@pytest.fixture
def vault(vault_path: Path):
    v = Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None)
    try:
        yield v
    finally:
        v.close()


@contextmanager
def busy_mount(vault: Vault, seconds: float):
    """Requests every 20 ms for ``seconds``, as a busy mount makes them (each
    touches the vault's activity); the block's end waits for the last one."""
    until = time.monotonic() + seconds

    def requests() -> None:
        while time.monotonic() < until:
            vault.activity.touch()
            time.sleep(0.02)

    vault.activity.touch()
    load = threading.Thread(target=requests)
    load.start()
    try:
        yield
    finally:
        load.join()


def after_tick(times_ns: int = 0) -> None:
    """Wait until the file clock (the kernel's coarse one, vault/clock.py) has
    moved past ``times_ns`` and past its present tick: a change made next gets
    a later time than any made before."""
    start = max(times_ns, clock.now_ns())
    while clock.now_ns() <= start:
        time.sleep(0.001)


def reopen(path: Path, **kwargs) -> Vault:
    kwargs.setdefault("compact_delay", None)
    return Vault.open(path, PASSPHRASE, **kwargs)


def run_cli(
    *args: str,
    vault: Path | None = None,
    input: bytes | None = None,
    passphrase: bytes | None = PASSPHRASE,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess:
    """Run the real `memvault` command in a subprocess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    if vault is not None:
        full_env["MEMVAULT_VAULT"] = str(vault)
    if passphrase is not None:
        full_env["MEMVAULT_PASSPHRASE"] = passphrase.decode()
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "memvault", *args],
        input=input if input is not None else b"",
        capture_output=True,
        env=full_env,
        timeout=timeout,
        start_new_session=True,  # no controlling terminal: prompts cannot block
    )


def assert_one_line_error(result: subprocess.CompletedProcess) -> str:
    """A failure is a non-zero exit and exactly one sentence on stderr."""
    assert result.returncode != 0, result
    err = result.stderr.decode()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("memvault: "), err
    return lines[0]


def encodings(needle: bytes) -> list[bytes]:
    """The forms in which a secret could leak: raw, UTF-16 and base64 at any alignment."""
    text = needle.decode()
    forms = [needle, text.encode("utf-16-le"), text.encode("utf-16-be")]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + needle)
        # Drop the characters that depend on the neighbouring bytes.
        start = -(-4 * shift // 3)
        forms.append(encoded[start : len(encoded) - 4])
    return [f for f in forms if len(f) >= 6]


def files_under(*roots: Path) -> list[Path]:
    found = []
    for root in roots:
        if root.is_file():
            found.append(root)
        elif root.is_dir():
            found += [p for p in root.rglob("*") if p.is_file()]
    return found


def assert_nowhere(needles: list[bytes], *roots: Path) -> None:
    files = files_under(*roots)
    assert files, "nothing to scan"
    for path in files:
        data = path.read_bytes()
        for needle in needles:
            for form in encodings(needle):
                assert form not in data, f"{needle!r} found as {form!r} in {path}"


@contextmanager
def small_disk(mountpoint: Path, size: str):
    """A real tmpfs of ``size`` (the tests run as root), always unmounted."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    options = f"size={size}"
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mountpoint)], check=True)
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)
