"""Issue 16: devices sync through real servers (sshd's SFTP, rclone's WebDAV), via
rclone remotes in a temporary configuration; only ciphertext on the remote,
no write lost, a hostile remote named."""

from __future__ import annotations

import base64
import contextlib
import random
import shutil
import threading
import time
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from memvault.errors import DeviceRemoved, RemoteTampered, RemoteUnavailable, WrongSyncPassphrase
from memvault.sync import group, objects
from memvault.sync.engine import COMPACT_SEGMENTS, Sync
from memvault.sync.merge import Version
from tests.conftest import FAST_KDF, assert_nowhere

from .devices import SYNC_PASSPHRASE, Device
from .servers import SERVERS, servers_unavailable

pytestmark = pytest.mark.skipif(
    servers_unavailable() is not None, reason=str(servers_unavailable())
)


@pytest.fixture(params=sorted(SERVERS))
def server(request, tmp_path):
    with SERVERS[request.param](tmp_path) as running:
        yield running


@pytest.fixture
def webdav_server(tmp_path):
    with SERVERS["webdav"](tmp_path) as running:
        yield running


@pytest.fixture
def make_device(tmp_path):
    made: list[Device] = []

    def make(name: str, server) -> Device:
        device = Device(tmp_path, name, server)
        made.append(device)
        return device

    yield make
    for device in made:
        device.close()


def test_two_devices_share_writes_renames_and_removals(server, make_device):
    a, b = make_device("laptop", server), make_device("desk", server)
    a.vault.put("notes/secret-plan.md", b"the launch codeword is BLUEHERON\n")
    a.vault.put("todo.md", b"- water the ficus\n")
    a.vault.mkdir("empty-dir")
    a.start_group()
    report = b.join()
    assert report.pulled == 4
    assert b.tree() == a.tree()

    b.vault.put("notes/from-desk.md", b"written on the desk\n")
    b.vault.rename("todo.md", "notes/todo.md")
    a.vault.delete("empty-dir")
    b.sync()
    a.sync()
    b.sync()
    assert a.tree() == b.tree()
    assert a.tree()["notes/todo.md"] == b"- water the ficus\n"
    assert "empty-dir" not in b.tree() and "todo.md" not in a.tree()

    status_devices = {d.name for d in b.state().devices.values()}
    assert status_devices == {"laptop", "desk"}
    # only ciphertext left the devices: no content, path or name in any remote byte
    assert_nowhere(
        [b"BLUEHERON", b"secret-plan", b"ficus", b"from-desk", b"empty-dir", b"laptop"],
        server.root,
    )


def test_edits_made_without_seeing_each_other_both_survive(webdav_server, make_device):
    a, b = make_device("laptop", webdav_server), make_device("desk", webdav_server)
    a.vault.put("n.md", b"first\n")
    a.start_group()
    b.join()
    a.vault.put("n.md", b"laptop's edit\n")
    b.vault.put("n.md", b"desk's edit\n")
    a.sync()
    report = b.sync()
    a.sync()
    assert a.tree() == b.tree()
    contents = {v for v in a.tree().values() if v is not None}
    assert contents == {b"laptop's edit\n", b"desk's edit\n"}
    copies = [p for p in a.tree() if "(conflict from " in p]
    assert len(copies) == 1 and report.conflicts == copies
    assert copies[0].startswith("n (conflict from ") and copies[0].endswith(".md")


def test_three_devices_and_a_thousand_random_operations_converge(webdav_server, make_device):
    """Writes, appends, renames, removals and directories on three devices, with syncs
    at random points: afterwards every device has the same tree, and every write that
    no device later overwrote or removed is in it."""
    rnd = random.Random(16)
    devices = [make_device(n, webdav_server) for n in ("one", "two", "three")]
    devices[0].start_group()
    for d in devices[1:]:
        d.join()
    written: dict[bytes, bool] = {}  # token -> still expected (nobody replaced it)
    compacted = 0

    def tokens_of(data: bytes) -> list[bytes]:
        return [t for t in data.split(b"\n") if t.startswith(b"tok-")]

    def supersede(data: bytes) -> None:
        for t in tokens_of(data):
            written[t] = False

    for step in range(1000):
        d = rnd.choice(devices)
        files = [p for p, v in d.tree().items() if v is not None]
        dirs = [p for p, v in d.tree().items() if v is None]
        token = f"tok-{step}".encode()
        action = rnd.random()
        if action < 0.30 or 0.80 <= action < 0.94 or not files:
            where = rnd.choice(["", *dirs])
            path = f"{where}/n{rnd.randint(0, 40)}.md".lstrip("/")
            if d.vault.exists(path):
                if d.vault.stat(path).is_dir:
                    continue
                supersede(d.vault.get(path))
            d.vault.put(path, token + b"\n")
            written[token] = True
        elif action < 0.50:
            path = rnd.choice(files)
            d.vault.put(path, d.vault.get(path) + token + b"\n")  # the old tokens stay
            written[token] = True
        elif action < 0.62:
            path = rnd.choice(files)
            target = f"{rnd.choice(['', *dirs])}/m{rnd.randint(0, 40)}.md".lstrip("/")
            if d.vault.exists(target):
                continue
            d.vault.rename(path, target)
        elif action < 0.72:
            path = rnd.choice(files)
            supersede(d.vault.get(path))
            d.vault.delete(path)
        elif action < 0.80:
            path = f"d{rnd.randint(0, 5)}"
            if not d.vault.exists(path):
                d.vault.mkdir(path)
        else:
            compacted += d.sync().compacted
    for _ in range(2):
        for d in devices:
            compacted += d.sync().compacted
    assert compacted  # the logs were compacted on the way (COMPACT_SEGMENTS)
    trees = [d.tree() for d in devices]
    assert trees[0] == trees[1] == trees[2]
    present = {t for v in trees[0].values() if v is not None for t in tokens_of(v)}
    lost = [t for t, expected in written.items() if expected and t not in present]
    assert not lost
    # every log compacted whole: a device joining now builds the same tree
    for d in devices:
        d.sync(compact=True)
    late = make_device("late", webdav_server)
    late.join()
    assert late.tree() == trees[0]


def test_a_shred_reaches_every_device_and_its_keys_leave_the_remote(webdav_server, make_device):
    a, b = make_device("laptop", webdav_server), make_device("desk", webdav_server)
    a.vault.put("keep.md", b"keep me\n")
    a.vault.put("burn.md", b"PAYLOAD-TO-SHRED\n")
    a.start_group()
    b.join()
    assert b.tree()["burn.md"] == b"PAYLOAD-TO-SHRED\n"
    a_files = dict(a.state().files)
    a.vault.delete("burn.md")
    report = a.sync()
    assert report.keys_deleted >= 1
    b.sync()
    assert "burn.md" not in b.tree() and b.tree()["keep.md"] == b"keep me\n"
    # every object, opened with every key the group has: the shredded memory is in none
    opened = _every_readable_version(webdav_server.root, b.state())
    assert ("keep.md", b"keep me\n") in opened
    assert not [o for o in opened if o[0] == "burn.md" or b"PAYLOAD-TO-SHRED" in o[1]]
    assert_nowhere([b"PAYLOAD-TO-SHRED", b"burn.md"], webdav_server.root)
    # nor in what either device keeps of the group (sealed in its vault)
    for device in (a, b):
        assert b"burn.md" not in device.state().encode()
    # and once the logs are compacted, not even its sealed bodies are on the remote
    burned = {m for m, f in a_files.items() if f.path == "burn.md"}
    assert [
        op for op in _every_op(webdav_server.root, b.state()) if op["m"] in burned and "s" in op
    ]
    for device in (a, b):
        device.sync(compact=True)
    assert not [
        op for op in _every_op(webdav_server.root, b.state()) if op["m"] in burned and "s" in op
    ]
    assert b.tree()["keep.md"] == b"keep me\n"


def _every_op(root: Path, state, *, only_readable: bool = False) -> list[dict]:
    """Every change in every log entry and snapshot on the remote, as stored
    (``only_readable``: in those ``state``'s keys open, skipping the others)."""
    ops = []
    for path in sorted(root.rglob("*")):
        segment = objects.parse_segment(path.relative_to(root).as_posix())
        if segment is None or not path.is_file():
            continue
        public_key = state.devices[segment[0]].public_key
        name = path.relative_to(root).as_posix()
        try:
            ops += objects.open_segment(
                state.group, state.keyring(), name, public_key, path.read_bytes()
            ).ops
        except objects.ObjectError:
            if not only_readable:
                raise
    return ops


def _every_readable_version(root: Path, state) -> list[tuple[str, bytes]]:
    """(path, content) of every memory version that some object on the remote holds
    and some key object still opens: log entries and snapshots alike."""
    keys = {}
    for path in (root / "keys").iterdir():
        name = f"keys/{path.name}"
        keys.update(objects.open_keys(state.group, state.keyring(), name, path.read_bytes()))
    opened = []
    for op in _every_op(root, state):
        key = keys.get(op["v"])
        if "s" not in op or key is None:
            continue
        header, content = objects.open_body(
            state.group, key, op["m"], Version.parse(op["v"]), base64.b64decode(op["s"])
        )
        opened.append((header["p"], content))
    return opened


def test_each_device_compacts_its_log_and_replaced_versions_leave_the_remote(
    webdav_server, make_device, tmp_path
):
    a, b = make_device("laptop", webdav_server), make_device("desk", webdav_server)
    a.vault.put("plan.md", b"DRAFT-0\n")
    a.vault.put("other.md", b"stays\n")
    a.start_group()
    b.join()
    log = webdav_server.root / "log" / a.state().device
    snaps = webdav_server.root / "snap" / a.state().device
    kept_entry = tmp_path / "entry-3"
    for i in range(1, COMPACT_SEGMENTS + 4):
        a.vault.put("plan.md", f"DRAFT-{i}\n".encode())
        a.sync()
        if i == 2:
            shutil.copy(log / f"{3:012d}", kept_entry)
        if i == 5:
            b.sync()  # b has seen change 6 of a: later it reads on from the middle of a snapshot
    # at 16 objects, a merged its newest into one snapshot, and deleted them
    assert sorted(p.name for p in snaps.iterdir())
    assert len(list(log.iterdir())) + len(list(snaps.iterdir())) < COMPACT_SEGMENTS
    # an old entry back next to the snapshot that replaced it (an interrupted
    # compaction leaves such): still one valid chain for every reader
    shutil.copy(kept_entry, log / f"{3:012d}")
    c = make_device("new", webdav_server)
    c.join()
    b.sync()
    final = f"DRAFT-{COMPACT_SEGMENTS + 3}\n".encode()
    for device in (b, c):
        assert device.tree() == a.tree()
        assert device.tree()["plan.md"] == final
    report = a.sync(compact=True)  # everything, now: one object, the leftover entry gone
    assert report.compacted >= 2
    assert not log.exists() or not list(log.iterdir())
    assert len(list(snaps.iterdir())) == 1
    opened = _every_readable_version(webdav_server.root, c.state())
    drafts = sorted(content for path, content in opened if path == "plan.md")
    assert drafts == [final]  # no replaced version is readable from the remote any more
    assert ("other.md", b"stays\n") in opened
    assert_nowhere([b"DRAFT-", b"plan.md"], webdav_server.root)
    for device in (b, c):
        device.sync()
        assert device.tree() == a.tree()
    # a flipped byte in a snapshot is named like one in an entry
    d = make_device("late", webdav_server)
    snapshot = next(snaps.iterdir())
    raw = bytearray(snapshot.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    snapshot.write_bytes(bytes(raw))
    with pytest.raises(RemoteTampered, match="changes 1-.* of device"):
        d.join()


def _tamper_setup(server, make_device):
    a, b = make_device("laptop", server), make_device("desk", server)
    a.vault.put("one.md", b"1\n")
    a.start_group()
    b.join()
    for i in range(2, 5):
        a.vault.put(f"n{i}.md", f"{i}\n".encode())
        a.sync()
    log = server.root / "log" / a.state().device
    assert sorted(p.name for p in log.iterdir())[-1].endswith("4")
    return a, b, log


def _refused(b: Device, needle: str) -> str:
    before_tree, before_state = b.tree(), b.state().encode()
    with pytest.raises(RemoteTampered) as caught:
        b.sync()
    message = str(caught.value)
    assert needle in message, message
    assert b.tree() == before_tree  # nothing applied
    assert b.state().encode() == before_state
    return message


@pytest.mark.parametrize("case", ["flip", "missing", "replayed", "reordered", "other-group"])
def test_a_tampered_remote_is_named_and_nothing_is_applied(
    webdav_server, make_device, case, tmp_path
):
    a, b, log = _tamper_setup(webdav_server, make_device)
    short = a.state().device[:8]
    if case == "flip":
        target = log / f"{3:012d}"
        raw = bytearray(target.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        target.write_bytes(bytes(raw))
        message = _refused(b, "change 3 of device")
    elif case == "missing":
        (log / f"{3:012d}").unlink()
        message = _refused(b, "change 3 of device")
    elif case == "replayed":  # an old change again, under the next number
        shutil.copy(log / f"{2:012d}", log / f"{5:012d}")
        message = _refused(b, "change 5 of device")
    elif case == "reordered":
        two, three = log / f"{2:012d}", log / f"{3:012d}"
        data2, data3 = two.read_bytes(), three.read_bytes()
        two.write_bytes(data3)
        three.write_bytes(data2)
        message = _refused(b, "change 2 of device")
    else:  # a change of another group's device, under this log's next name
        shutil.copy(_foreign_log_object(tmp_path, make_device), log / f"{5:012d}")
        message = _refused(b, "change 5 of device")
    assert short in message
    assert "laptop" in message


def _foreign_log_object(tmp_path: Path, make_device) -> Path:
    """Change 5 of a device of another group, on another server."""
    (tmp_path / "other-server").mkdir()
    with SERVERS["webdav"](tmp_path / "other-server") as elsewhere:
        c = make_device("elsewhere", elsewhere)
        c.start_group()
        for i in range(5):
            c.vault.put(f"e{i}.md", b"e\n")
            c.sync()
        log = next((elsewhere.root / "log").iterdir())
        kept = tmp_path / "foreign-object"
        shutil.copy(log / f"{5:012d}", kept)
        return kept


def test_a_log_rolled_back_is_refused(webdav_server, make_device):
    a, b, log = _tamper_setup(webdav_server, make_device)
    b.sync()
    (log / f"{4:012d}").unlink()  # the remote goes back to an older state
    _refused(b, "rolled back: it ends at change 3, this device had seen change 4")


def test_a_server_killed_mid_sync_loses_nothing_and_duplicates_nothing(webdav_server, make_device):
    a, b = make_device("laptop", webdav_server), make_device("desk", webdav_server)
    a.vault.put("one.md", b"1\n")
    a.start_group()
    b.join()
    for i in range(30):
        a.vault.put(f"batch/n{i}.md", f"{i}\n".encode() * 2000)
    incoming = webdav_server.root / "incoming"

    def kill_once_uploading() -> None:
        deadline = time.monotonic() + 30
        while not incoming.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        webdav_server.stop()

    killer = threading.Thread(target=kill_once_uploading)
    killer.start()
    try:
        with pytest.raises(RemoteUnavailable):
            a.sync()
    finally:
        killer.join()
    webdav_server.start_again()
    a.sync()
    b.sync()
    assert a.tree() == b.tree()
    assert sorted(p for p in b.tree() if p.startswith("batch/n")) == sorted(
        f"batch/n{i}.md" for i in range(30)
    )
    # no change was sent twice: one version per memory, one log entry per sync that sent
    versions_per_memory: dict[str, int] = {}
    for raw in a.state().ops.values():
        versions_per_memory[raw["m"]] = versions_per_memory.get(raw["m"], 0) + 1
    assert max(versions_per_memory.values()) == 1
    assert a.state().seen[a.state().device][0] == 2
    # what the cut upload left in incoming/ is removed once it is an hour old
    for batch in [d for d in incoming.iterdir() if d.is_dir()]:
        batch.rename(incoming / f"{int(time.time()) - 7200}-{batch.name.split('-')[-1]}")
    (incoming / "1000-cut").mkdir()
    (incoming / "1000-cut" / "000000").write_bytes(b"half an object")
    inflight = incoming / f"{int(time.time())}-inflight"  # another device's, uploading now
    inflight.mkdir()
    (inflight / "000000").write_bytes(b"another upload")
    b.sync()
    left = sorted(p.relative_to(incoming).as_posix() for p in incoming.rglob("*") if p.is_file())
    assert left == [f"{inflight.name}/000000"]


def _readable_by(root: Path, state) -> list[bytes]:
    """Every memory content some object on the remote opens to with ``state``'s keys."""
    keys = {}
    for path in (root / "keys").iterdir():
        with contextlib.suppress(objects.ObjectError):
            name = f"keys/{path.name}"
            keys.update(objects.open_keys(state.group, state.keyring(), name, path.read_bytes()))
    found = []
    for op in _every_op(root, state, only_readable=True):
        if "s" in op and op["v"] in keys:
            sealed = base64.b64decode(op["s"])
            version = Version.parse(op["v"])
            found.append(objects.open_body(state.group, keys[op["v"]], op["m"], version, sealed)[1])
    return found


def test_a_removed_device_reads_nothing_new_and_its_later_changes_count_nowhere(
    webdav_server, make_device
):
    a, b, c = (make_device(n, webdav_server) for n in ("laptop", "lost", "desk"))
    a.vault.put("shared-before.md", b"everyone had this\n")
    a.start_group()
    b.join()
    c.join()
    b.vault.put("from-lost.md", b"written before the removal\n")
    b.sync()
    a.sync()
    b.vault.put("race.md", b"RACE: sent after a last looked\n")
    b.sync()
    c.sync()  # c has race.md; a, removing b, does not know it
    assert c.tree()["race.md"] == b"RACE: sent after a last looked\n"
    new_passphrase = bytearray(b"a new group passphrase")
    group.remove_device(a.vault, a.remote(), a.state(), "lost", new_passphrase, FAST_KDF)
    a.vault.put("after.md", b"SECRET-AFTER the removal\n")
    a.sync()

    c.sync()
    assert "race.md" not in c.tree()  # b's changes after the cut count nowhere, c drops them
    assert c.tree() == a.tree()
    assert c.tree()["from-lost.md"] == b"written before the removal\n"
    assert c.state().epoch == 1 and a.state().epoch == 1

    b.vault.put("too-late.md", b"after being removed\n")
    with pytest.raises(DeviceRemoved, match="laptop"):
        b.sync()
    a.sync()
    c.sync()
    assert "too-late.md" not in a.tree() and "too-late.md" not in c.tree()
    assert c.tree() == a.tree()
    readable = _readable_by(webdav_server.root, b.state())
    assert b"everyone had this\n" in readable  # what it had stays with it
    assert not [r for r in readable if b"SECRET-AFTER" in r]
    with pytest.raises(WrongSyncPassphrase):
        group.open_group(a.remote(), bytearray(SYNC_PASSPHRASE))  # the old passphrase: no more
    d = make_device("new", webdav_server)
    opened = group.open_group(d.remote(), new_passphrase)
    state = group.join(d.vault, d.remote(), opened, name="new")
    Sync(d.vault, state, d.remote()).run()
    assert d.tree() == a.tree()

    # the removed device's owner kept the old key: a device enrolled with it counts for nothing
    old = b.state()
    sneaky = objects.Device("5eaky" * 6 + "00", "sneaky", bytes(SigningKey.generate().verify_key))
    sealed = objects.seal_device(old.group, old.group_key, sneaky)
    a.remote().put_many({objects.device_name(sneaky.device): sealed})
    a.sync()  # enrolled under a key it was not given after the change: counts as removed
    status = group.status(a.vault, a.state())
    assert {d["name"]: d["removed"] for d in status["devices"]} == {
        "laptop": False,
        "lost": True,
        "desk": False,
        "new": False,
        "sneaky": True,
    }
