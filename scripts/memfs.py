"""The simplest filesystem on memvault's stack, as a benchmark peer: pyfuse3 +
trio, everything in memory, no crypto, the same kernel cache settings as
memvault (60 s entry and attribute timeouts, keep_cache, readdirplus, no
default_permissions: the owner's mount checks modes itself), and pyfuse3's
reader tasks taking turns as memvault's do (memvault/fs/readers.py; with
--stock-readers, pyfuse3's own lock, handed over at every request). What it
costs is the floor the binding sets; what memvault costs above it is ours.

With --sealed it also does the least that memvault's guarantees need:
every write() seals the 256 KiB chunks it touches (XChaCha20-Poly1305 under
the file's own key, bound to the file, chunk and generation, with
memvault's own seal: OpenSSL for large chunks) and a small metadata record
with its parent and name (under a master key: a replay needs them), and
appends them to a journal file with a keyed BLAKE2b MAC (over the chunks'
tags, as memvault's journal does) in one pwritev before it replies; an
unlink appends a deletion, a rename the new name sealed. A read decrypts
the sealed chunks it touches, read back from the journal file: like
memvault, it keeps neither plaintext nor ciphertext in memory (when it kept
both, its 100 MB write took 1.32x gocryptfs's time, memvault's 1.08x: the
floor was above the vault). fsync() is an fdatasync of the journal. Like
memvault's default mount (without `unlock --xattrs`) it has no extended
attributes: GETXATTR answers ENOSYS, so the kernel stops asking before
every write (gocryptfs serves them and is asked). It is the floor of an
encrypted, journaled design on this stack: what memvault costs above it is
its own structure (records, the vault state, the audit trail, the path
tree).

With --guarded as well, it adds the least of what memvault's further
guarantees cost on each change, done as directly as this stack allows: a
file's own key wrapped under the master key at create (journaled with its
first write), its generation sealed apart from its metadata (what damage
accounting reads), an integrity sum over every file's (inode, generation)
updated with keyed BLAKE2b terms, an audit event noted with the file's
path sealed under its own key (once per file and name; the events and the
sum sealed once per 256 events and at fsync, as memvault seals them once
per burst), and the journal's header rewritten with its MAC after each
entry (so a cut at an entry boundary is seen). A rename re-seals the
moved file's metadata and generation, an unlink takes its term out of the
sum. It answers whether memvault's guarantees, not its code, are what
stands between it and a phase's goal.

Usage: python scripts/memfs.py MOUNTPOINT [--no-flush] [--sealed JOURNAL [--guarded]]
                                [--stock-readers]
  --no-flush        answer FLUSH with ENOSYS (the kernel stops sending it)
  --sealed JOURNAL  seal and journal every write (to the file JOURNAL)
  --guarded         with --sealed: memvault's further guarantees too (above)
  --stock-readers   pyfuse3's reader lock as it comes (above)
Runs until unmounted (fusermount3 -u) or SIGTERM.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import itertools
import os
import signal
import stat
import struct
import time
import zlib

import pyfuse3
import trio
from nacl.utils import random

from memvault.crypto.aead import open_sealed, seal
from memvault.fs import readers
from memvault.vault.journal import _sample

TIMEOUT = 60.0
CHUNK = 256 << 10  # as memvault (format 3)


class Journal:
    """Sealed chunks and metadata appended with one MAC'd pwritev per change."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self.size = 0
        self.master = random(32)
        self.mac_key = random(32)
        self.seq = 0

    def append(self, parts: list[bytes]) -> list[int]:
        """Where each part begins in the file."""
        self.seq += 1
        head = struct.pack(">IQ", sum(map(len, parts)), self.seq)
        mac = hashlib.blake2b(head, key=self.mac_key, digest_size=32)
        for part in parts:
            if len(part) >= 4096:  # a sealed chunk: length, CRC-32 of memvault's sample, tag
                mac.update(struct.pack(">QI", len(part), zlib.crc32(_sample(part))) + part[-16:])
            else:
                mac.update(part)
        entry = [head, *parts, mac.digest()]
        at, starts = self.size + len(head), []
        for part in parts:
            starts.append(at)
            at += len(part)
        self.size += os.pwritev(self.fd, entry, self.size)
        return starts

    def meta(self, node: Node) -> bytes:
        fields = (node.inode, node.parent, node.size, node.mtime, node.gen)
        record = struct.pack(">QQQQQ", *fields) + node.name
        return seal(self.master, record, b"meta")

    def name(self, node: Node, name: bytes) -> bytes:
        return seal(self.master, struct.pack(">Q", node.inode) + name, b"name")


class GuardedJournal(Journal):
    """The journal with what memvault's further guarantees add to each change."""

    HEADER = 40  # sequence number and MAC, rewritten after every entry

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.size = self.HEADER
        self.sum_key = random(32)
        self.integrity = 0  # XOR of keyed BLAKE2b terms over every file's (inode, gen)
        self.events: list[bytes] = []
        self.sealed_paths: dict[tuple[int, bytes], bytes] = {}

    def append(self, parts: list[bytes]) -> list[int]:
        starts = super().append(parts)
        head = struct.pack(">Q", self.seq)
        mac = hashlib.blake2b(head, key=self.mac_key, digest_size=32)
        os.pwrite(self.fd, head + mac.digest(), 0)
        return starts

    def wrap(self, node: Node) -> bytes:
        return seal(self.master, node.key, struct.pack(">Q", node.inode))

    def _term(self, node: Node, gen: int) -> int:
        mac = hashlib.blake2b(struct.pack(">QQ", node.inode, gen), key=self.sum_key, digest_size=32)
        return int.from_bytes(mac.digest(), "big")

    def changed(self, node: Node, op: bytes, old_gen: int | None) -> list[bytes]:
        """What a new generation of ``node`` adds to its journal entry."""
        if old_gen is not None:
            self.integrity ^= self._term(node, old_gen)
        self.integrity ^= self._term(node, node.gen)
        self.note(op, node)
        parts = [seal(self.master, struct.pack(">QQ", node.inode, node.gen), b"gen")]
        if node.wrapped:  # its first entry: the wrapped key goes with it
            parts.append(node.wrapped)
            node.wrapped = b""
        return parts

    def gone(self, node: Node) -> None:
        if node.gen:  # in the sum since its first entry
            self.integrity ^= self._term(node, node.gen)
        self.note(b"shred", node)

    def note(self, op: bytes, node: Node) -> None:
        path = self.sealed_paths.get((node.inode, node.name))
        if path is None:
            path = seal(node.key, node.name, struct.pack(">Q", node.inode))
            self.sealed_paths[node.inode, node.name] = path
        self.events.append(struct.pack(">QQ", node.inode, time.time_ns()) + op + path)
        if len(self.events) >= 256:
            self.seal_events()

    def seal_events(self) -> None:
        """The audit events and the integrity sum, sealed as one entry."""
        if self.events:
            trail = seal(self.master, b"".join(self.events), b"audit")
            state = seal(self.master, self.integrity.to_bytes(32, "big"), b"state")
            self.events = []
            self.append([trail, state])


class Node:
    def __init__(self, inode: int, mode: int, parent: int = 0, name: bytes = b"") -> None:
        self.inode = inode
        self.parent, self.name = parent, name
        self.mode = mode
        self.data = bytearray()  # the content, unless sealed
        self.size = 0
        self.children: dict[bytes, Node] = {}
        self.mtime = self.ctime = time.time_ns()
        self.uid, self.gid = os.getuid(), os.getgid()
        self.key = random(32)
        self.gen = 0
        self.wrapped = b""  # its key wrapped under the master (--guarded), until journaled
        self.sealed: dict[int, tuple[int, int, int]] = {}  # chunk -> (generation, offset, length)

    def attrs(self) -> pyfuse3.EntryAttributes:
        a = pyfuse3.EntryAttributes()
        a.st_ino = self.inode
        a.entry_timeout = a.attr_timeout = TIMEOUT
        a.st_mode = self.mode
        a.st_nlink = 2 if stat.S_ISDIR(self.mode) else 1
        a.st_size = self.size
        a.st_uid, a.st_gid = self.uid, self.gid
        a.st_blksize = 4096
        a.st_blocks = (self.size + 511) // 512
        a.st_atime_ns = a.st_mtime_ns = self.mtime
        a.st_ctime_ns = self.ctime
        return a


class MemFS(pyfuse3.Operations):
    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self, no_flush: bool, journal: Journal | None = None) -> None:
        super().__init__()
        self.no_flush = no_flush
        self.journal = journal
        self.guarded = journal if isinstance(journal, GuardedJournal) else None
        self.inodes = {pyfuse3.ROOT_INODE: Node(pyfuse3.ROOT_INODE, stat.S_IFDIR | 0o755)}
        self.ids = itertools.count(pyfuse3.ROOT_INODE + 1)
        self.dirs: dict[int, list[tuple[bytes, Node]]] = {}
        self.dir_ids = itertools.count(1)

    def node(self, inode: int) -> Node:
        try:
            return self.inodes[inode]
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    async def lookup(self, parent_inode, name, ctx=None):
        child = self.node(parent_inode).children.get(name)
        if child is None:
            missing = pyfuse3.EntryAttributes()
            missing.st_ino = 0
            missing.entry_timeout = TIMEOUT
            return missing
        return child.attrs()

    async def getattr(self, inode, ctx=None):
        return self.node(inode).attrs()

    async def setattr(self, inode, attr, fields, fh, ctx):
        node = self.node(inode)
        if fields.update_size:
            self.truncate(node, attr.st_size)
        if fields.update_mode:
            node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(attr.st_mode)
        if fields.update_mtime:
            node.mtime = attr.st_mtime_ns
        node.ctime = time.time_ns()
        return node.attrs()

    def _new(self, parent_inode: int, name: bytes, mode: int) -> Node:
        parent = self.node(parent_inode)
        if name in parent.children:
            raise pyfuse3.FUSEError(errno.EEXIST)
        node = Node(next(self.ids), mode, parent_inode, name)
        self.inodes[node.inode] = node
        parent.children[name] = node
        parent.mtime = parent.ctime = time.time_ns()
        return node

    async def mkdir(self, parent_inode, name, mode, ctx):
        return self._new(parent_inode, name, stat.S_IFDIR | stat.S_IMODE(mode)).attrs()

    async def create(self, parent_inode, name, mode, flags, ctx):
        node = self._new(parent_inode, name, stat.S_IFREG | stat.S_IMODE(mode))
        if self.guarded is not None:
            node.wrapped = self.guarded.wrap(node)
        return pyfuse3.FileInfo(fh=node.inode, keep_cache=True), node.attrs()

    async def open(self, inode, flags, ctx):
        node = self.node(inode)
        if flags & os.O_TRUNC:
            self.truncate(node, 0)
        return pyfuse3.FileInfo(fh=inode, keep_cache=not flags & os.O_TRUNC)

    def chunk(self, node: Node, index: int) -> bytearray:
        """A sealed file's chunk, read back from the journal and opened, as long as
        the file's size says (zeros where nothing was written)."""
        length = max(0, min(CHUNK, node.size - index * CHUNK))
        if index not in node.sealed:
            return bytearray(length)
        gen, offset, stored = node.sealed[index]
        sealed = os.pread(self.journal.fd, stored, offset)
        content = open_sealed(node.key, sealed, struct.pack(">QIQ", node.inode, index, gen))
        del content[length:]
        content.extend(bytes(length - len(content)))
        return content

    def truncate(self, node: Node, size: int) -> None:
        node.mtime = time.time_ns()
        if self.journal is None:
            del node.data[size:]
            node.data.extend(bytes(size - len(node.data)))
            node.size = size
            return
        last = size // CHUNK
        shrinks = size < node.size
        kept = self.chunk(node, last)[: size - last * CHUNK] if shrinks and size % CHUNK else None
        for index in [index for index in node.sealed if shrinks and index >= last]:
            del node.sealed[index]
        node.size = size
        if kept:  # the new last chunk, cut (not in the benchmark)
            self.seal_chunks(node, {last: kept})

    def seal_chunks(self, node: Node, chunks: dict[int, bytes | memoryview]) -> None:
        """Seal the given chunks of a file as its next generation and journal them."""
        node.gen += 1
        parts = []
        for index, content in chunks.items():
            parts.append(seal(node.key, content, struct.pack(">QIQ", node.inode, index, node.gen)))
        parts.append(self.journal.meta(node))
        if self.guarded is not None:
            parts += self.guarded.changed(node, b"write", node.gen - 1 or None)
        starts = self.journal.append(parts)
        for (index, _), sealed, start in zip(chunks.items(), parts, starts, strict=False):
            node.sealed[index] = (node.gen, start, len(sealed))

    async def read(self, fh, off, size):
        node = self.node(fh)
        if self.journal is None:
            return bytes(node.data[off : off + size])
        end = min(off + size, node.size)
        parts = []
        for index in range(off // CHUNK, (end - 1) // CHUNK + 1 if end > off else 0):
            start = index * CHUNK
            parts.append(self.chunk(node, index)[max(off - start, 0) : end - start])
        return b"".join(parts)

    async def write(self, fh, off, buf):
        node = self.node(fh)
        end = off + len(buf)
        node.mtime = time.time_ns()
        if self.journal is None:
            if off > len(node.data):
                node.data.extend(bytes(off - len(node.data)))
            node.data[off:end] = buf
            node.size = len(node.data)
            return len(buf)
        # no plaintext kept: a chunk the write covers whole is sealed from its
        # buffer, one it covers in part is read back and patched; a hole
        # before off is sealed as zeros
        view, chunks = memoryview(buf), {}
        old_size, node.size = node.size, max(node.size, end)
        for index in range(min(off, old_size) // CHUNK, (end - 1) // CHUNK + 1):
            start = index * CHUNK
            stop = min(start + CHUNK, node.size)
            if off <= start and end >= stop:
                chunks[index] = view[start - off : stop - off]
            else:
                content = self.chunk(node, index) if start < old_size else bytearray()
                content.extend(bytes(stop - start - len(content)))
                lo, hi = max(off, start), min(end, stop)
                content[lo - start : hi - start] = view[lo - off : hi - off]
                chunks[index] = content
        self.seal_chunks(node, chunks)
        return len(buf)

    async def flush(self, fh):
        if self.no_flush:
            raise pyfuse3.FUSEError(errno.ENOSYS)

    async def fsync(self, fh, datasync):
        if self.journal is None:
            raise pyfuse3.FUSEError(errno.ENOSYS)  # nothing to flush: never asked again
        if self.guarded is not None:
            self.guarded.seal_events()
        os.fdatasync(self.journal.fd)

    async def getxattr(self, inode, name, ctx):
        raise pyfuse3.FUSEError(errno.ENOSYS)  # none, as memvault's default mount

    async def release(self, fh):
        pass

    async def unlink(self, parent_inode, name, ctx):
        parent = self.node(parent_inode)
        node = parent.children.pop(name)
        self.inodes.pop(node.inode, None)
        parent.mtime = parent.ctime = time.time_ns()
        if self.guarded is not None:
            self.guarded.gone(node)
        if self.journal is not None:
            self.journal.append([struct.pack(">BQ", 2, node.inode)])

    async def rmdir(self, parent_inode, name, ctx):
        parent = self.node(parent_inode)
        if parent.children[name].children:
            raise pyfuse3.FUSEError(errno.ENOTEMPTY)
        await self.unlink(parent_inode, name, ctx)

    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        node = self.node(parent_inode_old).children.pop(name_old)
        target = self.node(parent_inode_new)
        replaced = target.children.pop(name_new, None)
        if replaced is not None:
            self.inodes.pop(replaced.inode, None)
        target.children[name_new] = node
        node.parent, node.name = parent_inode_new, name_new
        if self.guarded is not None:  # the moved file's record sealed again, the target shredded
            if replaced is not None:
                self.guarded.gone(replaced)
            node.gen += 1
            moved = self.guarded.changed(node, b"rename", node.gen - 1 or None)
            self.journal.append([self.journal.meta(node), *moved])
        elif self.journal is not None:
            self.journal.append([self.journal.name(node, name_new)])

    async def opendir(self, inode, ctx):
        fh = next(self.dir_ids)
        self.dirs[fh] = sorted(self.node(inode).children.items())
        return fh

    async def readdir(self, fh, start_id, token):
        entries = self.dirs[fh]
        for index in range(start_id, len(entries)):
            name, node = entries[index]
            if not pyfuse3.readdir_reply(token, name, node.attrs(), index + 1):
                break

    async def releasedir(self, fh):
        self.dirs.pop(fh, None)

    async def statfs(self, ctx):
        out = pyfuse3.StatvfsData()
        out.f_bsize = out.f_frsize = 4096
        out.f_blocks = out.f_bfree = out.f_bavail = 1 << 20
        out.f_files = out.f_ffree = out.f_favail = 1 << 20
        out.f_namemax = 255
        return out


async def _main() -> None:
    async with trio.open_nursery() as nursery:

        async def stop_on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                async for _ in received:
                    pyfuse3.terminate()
                    return

        nursery.start_soon(stop_on_signal)
        await pyfuse3.main(min_tasks=8, max_tasks=64)
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mountpoint")
    parser.add_argument("--no-flush", action="store_true")
    parser.add_argument("--sealed", metavar="JOURNAL")
    parser.add_argument("--guarded", action="store_true")
    parser.add_argument("--stock-readers", action="store_true")
    args = parser.parse_args()
    if args.guarded and not args.sealed:
        parser.error("--guarded needs --sealed JOURNAL")
    options = {"fsname=memfs", "noatime"}  # as memvault's own mount: no default_permissions
    kind = GuardedJournal if args.guarded else Journal
    journal = kind(args.sealed) if args.sealed else None
    if not args.stock_readers:
        readers.install()
    pyfuse3.init(MemFS(args.no_flush, journal), args.mountpoint, options)
    try:
        trio.run(_main)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
