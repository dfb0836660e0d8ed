"""Real tools inside a real mount, each checking the content it leaves."""

from __future__ import annotations

import filecmp
import os
import random
from pathlib import Path

import pytest

from ..fsutil import mounted, run


@pytest.fixture
def mnt(tmp_path):
    with mounted(tmp_path) as mount:
        yield mount


def make_tree(root: Path, seed: int = 1) -> dict[str, bytes]:
    rng = random.Random(seed)
    files = {}
    for i in range(30):
        rel = f"dir{i % 4}/sub{i % 3}/note-{i}.md" if i % 5 else f"top-{i}.md"
        data = (f"# Note {i}\n" + "line of text\n" * rng.randint(0, 300)).encode()
        if i == 7:
            data = bytes(rng.getrandbits(8) for _ in range(200_000))  # binary, multi-page
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files[rel] = data
    (root / "empty-dir").mkdir()
    return files


def assert_same_tree(a: Path, b: Path) -> None:
    cmp = filecmp.dircmp(a, b)
    assert not cmp.left_only and not cmp.right_only and not cmp.diff_files, (
        cmp.left_only,
        cmp.right_only,
        cmp.diff_files,
    )
    for sub in cmp.common_dirs:
        assert_same_tree(a / sub, b / sub)
    for name in cmp.common_files:
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_cp_r_in_and_out_is_byte_identical(mnt, tmp_path):
    src = tmp_path / "src"
    make_tree(src)
    run("cp", "-r", str(src), str(mnt.root / "copy"))
    assert_same_tree(src, mnt.root / "copy")
    run("cp", "-r", str(mnt.root / "copy"), str(tmp_path / "back"))
    assert_same_tree(src, tmp_path / "back")


def test_shell_append_and_sed_in_place(mnt):
    note = mnt.root / "notes.md"
    run("sh", "-c", f"echo '- first' >> '{note}' && echo '- second' >> '{note}'")
    assert note.read_text() == "- first\n- second\n"
    run("sed", "-i", "s/second/2nd/", str(note))
    assert note.read_text() == "- first\n- 2nd\n"


def test_editor_style_atomic_save(mnt):
    target = mnt.root / "projects" / "api.md"
    target.parent.mkdir()
    target.write_text("old content\n")
    tmp = target.with_name(".api.md.swp")
    with open(tmp, "w") as f:
        f.write("new content, saved atomically\n")
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, target)
    assert target.read_text() == "new content, saved atomically\n"
    assert sorted(os.listdir(target.parent)) == ["api.md"]


def test_python_open_seek_write(mnt):
    path = mnt.root / "seek.bin"
    with open(path, "wb") as f:
        f.write(b"0123456789")
        f.seek(3)
        f.write(b"abc")
        f.seek(15)
        f.write(b"end")
    assert path.read_bytes() == b"012abc6789" + b"\0" * 5 + b"end"
    with open(path, "r+b") as f:
        f.truncate(4)
    assert path.read_bytes() == b"012a"
    with open(path, "ab") as f:
        f.write(b"++")
    assert path.read_bytes() == b"012a++"
    with open(path, "r+b") as f, open(path, "rb") as g:  # handles see each other's writes
        f.write(b"Z")
        f.flush()
        assert g.read() == b"Z12a++"


def test_find_grep_du(mnt, tmp_path):
    files = make_tree(mnt.root)
    found = run("find", str(mnt.root), "-name", "*.md", "-type", "f").stdout.decode().split()
    assert sorted(os.path.relpath(p, mnt.root) for p in found) == sorted(files)
    hits = run("grep", "-rl", "# Note 12", str(mnt.root)).stdout.decode().split()
    assert [os.path.relpath(p, mnt.root) for p in hits] == ["dir0/sub0/note-12.md"]
    du = int(run("du", "-sb", str(mnt.root)).stdout.split()[0])
    assert du >= sum(len(d) for d in files.values())


def test_tar_create_and_extract(mnt, tmp_path):
    src = tmp_path / "src"
    make_tree(src)
    archive = tmp_path / "tree.tar"
    run("tar", "cf", str(archive), "-C", str(src), ".")
    run("tar", "xf", str(archive), "-C", str(mnt.root))
    assert_same_tree(src, mnt.root)
    run("tar", "cf", str(tmp_path / "again.tar"), "-C", str(mnt.root), ".")
    out = tmp_path / "out"
    out.mkdir()
    run("tar", "xf", str(tmp_path / "again.tar"), "-C", str(out))
    assert_same_tree(src, out)


def test_rsync_in_and_out(mnt, tmp_path):
    src = tmp_path / "src"
    make_tree(src)
    os.utime(src / "top-0.md", ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    os.chmod(src / "top-0.md", 0o640)
    run("rsync", "-a", f"{src}/", f"{mnt.root}/r/")
    assert_same_tree(src, mnt.root / "r")
    st = (mnt.root / "r" / "top-0.md").stat()
    assert st.st_mtime_ns == 1_600_000_000_000_000_000 and (st.st_mode & 0o777) == 0o640
    run("rsync", "-a", f"{mnt.root}/r/", f"{tmp_path}/back/")
    assert_same_tree(src, tmp_path / "back")
    again = run("rsync", "-a", "--itemize-changes", f"{src}/", f"{mnt.root}/r/")
    assert again.stdout.strip() == b"", "a second rsync must find nothing to do"


def test_git_inside_the_mount(mnt):  # git comes with scripts/setup
    repo = mnt.root / "repo"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    run("git", "init", "-q", cwd=repo, env=env)
    (repo / "README.md").write_text("# memories\n")
    (repo / "notes").mkdir()
    (repo / "notes" / "a.md").write_text("alpha\n")
    run("git", "add", "-A", cwd=repo, env=env)
    run("git", "commit", "-q", "-m", "first commit", cwd=repo, env=env)
    (repo / "notes" / "a.md").write_text("alpha, changed\n")
    run("git", "commit", "-q", "-am", "second commit", cwd=repo, env=env)
    log = run("git", "log", "--format=%s", cwd=repo, env=env).stdout.decode().split("\n")
    assert log[:2] == ["second commit", "first commit"]
    run("git", "fsck", "--strict", cwd=repo, env=env)
    assert run("git", "status", "--porcelain", cwd=repo, env=env).stdout == b""


def test_truncating_open_chown_and_fsync_of_a_directory(mnt):
    note = mnt.root / "t.md"
    note.write_text("a long first version\n")
    run("sh", "-c", f"echo short > '{note}'")  # O_TRUNC
    assert note.read_text() == "short\n"
    os.chown(note, 1234, 5678)
    st = note.stat()
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    fd = os.open(mnt.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    with open(note, "r+b") as f:
        f.write(b"S")
        os.fsync(f.fileno())
    assert note.read_bytes() == b"Short\n"
