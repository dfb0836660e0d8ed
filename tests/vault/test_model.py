"""Property-based test: random put/get/mv/rm/reopen/compact sequences behave
like a plain dict of paths (plus the set of directories they imply)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memvault import errors, paths
from memvault.vault import Vault

from ..conftest import FAST_KDF, PASSPHRASE, reopen

DIRS = ["", "x", "x/y", "z"]
FILES = st.builds(paths.join, st.sampled_from(DIRS), st.sampled_from(["a.md", "b.md", "c"]))
CONTENT = st.binary(max_size=3000)


class VaultModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="memvault-model-"))
        self.path = self.tmp / "memory.vault"
        self.vault = Vault.create(self.path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None)
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = set()

    def teardown(self) -> None:
        self.vault.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _add_parents(self, path: str) -> None:
        self.dirs.update(paths.ancestors(path))

    @rule(path=FILES, data=CONTENT)
    def put(self, path, data):
        self.vault.put(path, data)
        self.files[path] = data
        self._add_parents(path)

    @rule(path=FILES)
    def get(self, path):
        if path in self.files:
            assert self.vault.get(path) == self.files[path]
        else:
            try:
                self.vault.get(path)
                raise AssertionError(f"{path} should not exist")
            except errors.MemoryNotFound:
                pass

    @rule(src=FILES, dst=FILES)
    def move_file(self, src, dst):
        if src not in self.files:
            try:
                self.vault.rename(src, dst)
                raise AssertionError("moving a missing file must fail")
            except errors.MemoryNotFound:
                return
        self.vault.rename(src, dst)
        if src != dst:
            self.files[dst] = self.files.pop(src)
            self._add_parents(dst)

    @rule(src=st.sampled_from(DIRS[1:]), dst=st.sampled_from(["w", "z/v", "x"]))
    def move_dir(self, src, dst):
        try:
            self.vault.rename(src, dst)
        except errors.MemoryNotFound:
            assert src not in self.dirs
            return
        except errors.InvalidMove:
            assert paths.is_within(dst, src)
            return
        except errors.DirectoryNotEmpty:
            below = [*self.files, *self.dirs]
            assert any(p != dst and paths.is_within(p, dst) for p in below)
            return
        assert src in self.dirs and (src == dst or not paths.is_within(dst, src))
        moved = {p for p in self.files if paths.is_within(p, src)}
        for p in moved:
            self.files[dst + p[len(src) :]] = self.files.pop(p)
        moved_dirs = {d for d in self.dirs if paths.is_within(d, src)}
        self.dirs -= moved_dirs
        self.dirs |= {dst + d[len(src) :] for d in moved_dirs}
        self._add_parents(dst)

    @rule(path=FILES)
    def remove(self, path):
        if path in self.files:
            self.vault.delete(path)
            del self.files[path]
        else:
            try:
                self.vault.delete(path)
                raise AssertionError("removing a missing file must fail")
            except errors.MemoryNotFound:
                pass

    @rule(directory=st.sampled_from(DIRS[1:]))
    def remove_tree(self, directory):
        if directory not in self.dirs:
            return
        self.vault.delete(directory, recursive=True)
        self.files = {p: d for p, d in self.files.items() if not paths.is_within(p, directory)}
        self.dirs = {d for d in self.dirs if not paths.is_within(d, directory)}

    @precondition(lambda self: self.files)
    @rule()
    def compact(self):
        self.vault.compact()

    @rule()
    def reopen(self):
        self.vault.close()
        self.vault = reopen(self.path)

    @invariant()
    def same_tree(self):
        walked = self.vault.walk()
        assert {m.path for m in walked if not m.is_dir} == set(self.files)
        assert {m.path for m in walked if m.is_dir} == self.dirs
        assert len(self.vault) == len(self.files)


VaultModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestVaultModel = VaultModel.TestCase
