"""pyfuse3 Operations: a thin adapter from kernel requests to the Vault.

Everything but fsync and search queries is answered on the trio thread:
metadata from the unlocked vault's in-memory index, contents chunk by chunk
(a read decrypts the 256 KiB chunks it touches, a write re-seals them), and
every write() is committed to the journal before it returns (one write(),
cheaper than a thread hop), and the bookkeeping after it waits until the
reply is sent (vault/later.py). So close() needs nothing: FLUSH is answered
ENOSYS once, and the kernel stops sending it. fsync and queries run in a
worker thread (`trio.to_thread`). The Vault itself is thread-safe.

Speed comes from the kernel's caches: positive (and negative) entry and
attribute timeouts, full attributes in readdir replies (readdirplus), and
keep_cache on open (every change to a file passes through the kernel, so its
page cache is never stale), and a small file's content handed to that cache
when it is opened and the cache lacks it (open), so its reads need no request.
search/ is handled here too (see searchtree.py).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import functools
import itertools
import os
import stat
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pyfuse3
import trio

from .. import paths
from ..errors import (
    BadPath,
    IsADirectory,
    IsASymlink,
    MemoryNotFound,
    MemvaultError,
    NoSuchAttribute,
    NotSupported,
    ReadOnlyName,
    TooLarge,
)
from ..search import QueryError, SearchService, parse, render, render_error
from ..vault import MAX_MEMORY_SIZE, Vault, clock
from ..vault.audit import THE_VAULT, Caller, current_caller, process_caller
from ..vault.bodies import chunk_length
from ..vault.records import DIRECTORY, FILE, SYMLINK, Meta
from .errors import as_fuse_error
from .handles import OpenFile, OpenFiles, RecentBodies
from .inodes import ROOT, InodeTable
from .permissions import (
    ROOT_UID,
    R,
    Requester,
    W,
    X,
    require,
    require_search,
    require_setattr,
    root_permitted,
)
from .searchtree import ResultCache

T = TypeVar("T")

CACHE_TIMEOUT = 3600.0
"""Seconds the kernel may cache names and attributes. The daemon is the vault's
only writer and every change goes through the kernel, but for a sync's, which
forget_paths takes back from it: nothing goes stale, so the cache may outlast
an agent's pause between bursts of work. (At 60 s, each open of a file last
looked up more than a minute before cost a LOOKUP round trip first.)"""

SEARCH_DIR_TIMEOUT = 1.0
"""Seconds the kernel may keep search/ itself (not its results, looked up at each open)."""

BLOCK_SIZE = 4096
SEARCH_NAME = b"search"
SEARCH_INODE = 1 << 62
"""search/ and its result files live above every inode the table can issue."""
RESULT_FH_BASE = 1 << 62
"""Handles of open search results; handles of files stay far below."""
XATTR_NAMESPACE = "user."
SLOW_SYNC_S = 0.002
"""An fsync that took longer than this sends the next one to a worker thread."""


def request(handler: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A kernel request: the mount is busy now (background work waits for a lull,
    see activity.py), the vault's changes are for the process that asked
    (audit.py; requests on an open file: the process that opened it), and what
    the handler raises becomes an errno."""

    @functools.wraps(handler)
    async def wrapper(self: VaultOperations, *args, **kwargs) -> T:
        self.activity.touch()
        self.catch_up()  # what the last request left for after its reply (vault/later.py)
        ctx = args[-1] if args else None
        if type(ctx) is pyfuse3.RequestContext:  # who asks, for the audit trail
            current_caller.set(process_caller(ctx.pid, ctx.uid))
        try:
            return await handler(self, *args, **kwargs)
        except Exception as exc:
            raise as_fuse_error(exc, handler.__name__) from None

    return wrapper


FMODE_EXEC = 0x20
"""The kernel's flag on the open of a program for execve (which asks for x only)."""


def _wanted(flags: int) -> int:
    """The access an open() asks for: r, w or both, w to truncate too; x to execute."""
    if flags & FMODE_EXEC:
        return X
    mode = flags & os.O_ACCMODE
    want = R if mode == os.O_RDONLY else W if mode == os.O_WRONLY else R | W
    return want | W if flags & os.O_TRUNC else want


class VaultOperations(pyfuse3.Operations):
    supports_dot_lookup = False
    enable_writeback_cache = False
    enable_acl = False

    def __init__(
        self,
        vault: Vault,
        *,
        search: SearchService | None = None,
        mountpoint: str = "",
        xattrs: bool = False,
        check_access: bool = False,
    ) -> None:
        """``check_access``: the kernel leaves access checks to the handlers (a
        mount without default_permissions, see permissions.py)."""
        super().__init__()
        self.vault = vault
        self.xattrs = xattrs
        self.check_access = check_access
        self.activity = vault.activity
        self.catch_up = vault.catch_up
        self.search = search
        self.mountpoint = mountpoint
        self.results = ResultCache(SEARCH_INODE + 1)
        vault.add_listener(self.results.invalidate)  # a shred or an edit: no stale result
        self.recent = RecentBodies()
        vault.add_listener(self.recent.on_change)
        self._chunk_size = vault.chunk_size
        self._result_handles: dict[int, bytes] = {}
        self._result_fhs = itertools.count(RESULT_FH_BASE)
        self.inodes = InodeTable()
        self.files = OpenFiles()
        self._dirs: dict[int, list[tuple[bytes, int, pyfuse3.EntryAttributes]]] = {}
        self._openers: dict[int, Caller] = {}  # who opened each handle (audit.py)
        self._dir_ids = iter(range(1, 2**62))
        self._sync_inline = True  # while the disk flushes quickly (see _durable)

    # -- helpers -----------------------------------------------------------------

    async def _in_thread(self, fn: Callable[..., T], *args, **kwargs) -> T:
        """Run what may wait on the disk or the model (a slow fsync, a query) off the
        trio thread.

        Everything else runs inline: a journaled commit costs one write(), far
        less than a thread hop (about 100 µs here).
        """
        return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    async def _durable(self, fn: Callable[[], None]) -> None:
        """Run an fsync: on the trio thread while the disk flushes within SLOW_SYNC_S
        (a thread hop costs half as much as a journal fdatasync here), in a
        worker thread once one took longer, so a slow disk never holds up the
        other requests for long. Each fsync's time decides for the next."""
        start = time.monotonic()
        if self._sync_inline:
            fn()
        else:
            await self._in_thread(fn)
        self._sync_inline = time.monotonic() - start < SLOW_SYNC_S

    def _record(self, inode: int) -> bytes | None:
        """The record id of an inode (None for the root)."""
        if inode >= SEARCH_INODE:
            raise ReadOnlyName("search/")
        try:
            return self.inodes.record(inode)
        except KeyError:
            raise MemoryNotFound(f"inode {inode}") from None

    def _name(self, parent_inode: int, name: bytes) -> tuple[bytes | None, str]:
        """(directory record id, name) of a request naming an entry in a directory."""
        if parent_inode == ROOT and name == SEARCH_NAME and self.search is not None:
            raise ReadOnlyName("search/")
        return self._record(parent_inode), paths.check_name(os.fsdecode(name))

    def _asker(self, ctx) -> Requester | None:
        """Who asks, where the handlers check access: None where the kernel does
        (default_permissions), and for root, who passes (see permissions.py)."""
        if not self.check_access or ctx.uid == ROOT_UID:
            return None
        return Requester(ctx)

    def _may(self, record_id: bytes | None, ctx, want: int) -> None:
        """``want`` (R|W|X, or 0) on an entry and x on the directories above it (EACCES)."""
        who = self._asker(ctx)
        if who is not None:
            require(self._meta(record_id), who, want)
            require_search(self.vault.directories_above(record_id), who)

    def _may_change(self, directory: bytes | None, ctx) -> None:
        """A name added to or taken from a directory: w and x on it (EACCES)."""
        self._may(directory, ctx, W | X)

    def _attrs(self, meta: Meta, record_id: bytes | None) -> pyfuse3.EntryAttributes:
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = ROOT if record_id is None else self.inodes.inode(record_id)
        attrs.generation = 0
        attrs.entry_timeout = CACHE_TIMEOUT
        attrs.attr_timeout = CACHE_TIMEOUT
        attrs.st_mode = meta.st_mode
        if meta.is_dir:
            attrs.st_nlink = self.vault.link_count(record_id)
        else:
            attrs.st_nlink = 0 if meta.orphan else 1
        attrs.st_uid = meta.uid
        attrs.st_gid = meta.gid
        attrs.st_rdev = 0
        size = meta.size
        attrs.st_size = size
        attrs.st_blksize = BLOCK_SIZE
        attrs.st_blocks = (size + 511) // 512
        attrs.st_atime_ns = meta.shown_atime_ns
        attrs.st_mtime_ns = meta.mtime_ns
        attrs.st_ctime_ns = meta.ctime_ns
        return attrs

    def _attrs_of(self, record_id: bytes | None) -> pyfuse3.EntryAttributes:
        return self._attrs(self._meta(record_id), record_id)

    def _chunk(self, state: OpenFile, index: int, meta: Meta) -> bytearray:
        """Chunk ``index`` of an open file, from its state, from the recent small
        files or decrypted once; as long as the file says (a chunk kept before
        the file grew past it is zero-extended: what lies beyond its old end is
        a hole)."""
        chunk = state.chunk(index)
        if chunk is None:
            small = not meta.chunked  # one chunk, its whole content
            kept = self.recent.get(state.record_id, meta.body_gen) if small else None
            if kept is not None:
                chunk = bytearray(kept)
            else:
                chunk = self.vault.read_chunk(state.record_id, index)
                if small:
                    self.recent.put(state.record_id, meta.body_gen, bytes(chunk))
            state.remember(index, chunk)
        length = chunk_length(meta.size, index, self._chunk_size)
        if len(chunk) < length:
            chunk.extend(bytes(length - len(chunk)))
        return chunk

    def forget_paths(self, changed: set[str]) -> None:
        """Paths changed behind the mount (by a sync, in its own thread): the kernel
        drops what it cached of them (names, attributes, pages), open files their
        decrypted chunks. Never called from a request: the kernel's invalidation
        may wait for one."""
        for path in sorted(changed):
            parent, name = paths.parent(path), paths.basename(path)
            parent_inode = ROOT if parent == paths.ROOT else self._known_inode(parent)
            if parent_inode is not None:
                pyfuse3.invalidate_entry_async(parent_inode, os.fsencode(name), ignore_enoent=True)
            inode = self._known_inode(path)
            if inode is None:
                continue
            state = self.files.of_record(self.inodes.record(inode))
            if state is not None:
                state.stale = True
            with contextlib.suppress(OSError):  # not in the kernel's cache
                pyfuse3.invalidate_inode(inode)

    def _known_inode(self, path: str) -> int | None:
        """The inode the kernel may know ``path`` by (None: none was issued)."""
        try:
            return self.inodes.known(self.vault.record_id(path))
        except MemvaultError:
            return None

    # -- names and attributes --------------------------------------------------

    @request
    async def lookup(self, parent_inode, name, ctx=None):
        if self.search is not None:
            if parent_inode == ROOT and name == SEARCH_NAME:
                return self._search_dir_attrs()
            if parent_inode == SEARCH_INODE:
                return await self._run_query(os.fsdecode(name))
        parent, child = self._name(parent_inode, name)
        if ctx is not None:
            self._may(parent, ctx, X)
        try:
            record_id, meta = self.vault.lookup(parent, child)
            return self._attrs(meta, record_id)
        except MemoryNotFound:
            # A negative entry the kernel may cache: every create passes through
            # the kernel, which drops it then.
            missing = pyfuse3.EntryAttributes()
            missing.st_ino = 0
            missing.entry_timeout = CACHE_TIMEOUT
            return missing

    @request
    async def getattr(self, inode, ctx=None):
        if inode == SEARCH_INODE:
            return self._search_dir_attrs()
        if inode > SEARCH_INODE:
            name = self.results.name_of(inode)
            if name is None:
                raise MemoryNotFound(f"search/ inode {inode}")
            return await self._run_query(name)
        return self._attrs_of(self._record(inode))

    # -- search/ ---------------------------------------------------------------

    def _search_dir_attrs(self) -> pyfuse3.EntryAttributes:
        root = self.vault.root_meta()
        attrs = self._attrs(root, None)
        attrs.st_ino = SEARCH_INODE
        attrs.st_mode = stat.S_IFDIR | 0o500
        attrs.st_mtime_ns = attrs.st_ctime_ns = time.time_ns()
        attrs.attr_timeout = attrs.entry_timeout = SEARCH_DIR_TIMEOUT
        return attrs

    def _result_attrs(self, inode: int, size: int) -> pyfuse3.EntryAttributes:
        attrs = self._search_dir_attrs()
        attrs.st_ino = inode
        # Looked up again at every open (the query runs then), with the size
        # read then; the page cache is dropped at each open (no keep_cache).
        attrs.entry_timeout = 0
        attrs.st_mode = stat.S_IFREG | 0o400
        attrs.st_nlink = 1
        attrs.st_size = size
        attrs.st_blocks = (size + 511) // 512
        return attrs

    async def _run_query(self, name: str) -> pyfuse3.EntryAttributes:
        """Run (or reuse, for a few seconds and while the vault is unchanged) the query
        a file name spells."""
        cached = self.results.current(name)
        if cached is None:
            version = self.results.version  # a change during the query makes it stale
            try:
                query = parse(name)
            except QueryError:
                raise MemoryNotFound(name) from None  # no such result file
            self.vault.note("search")  # not the query: it may name a memory
            try:
                results = await self._in_thread(self.search.search, query)
                rendered = render(query, results, self.mountpoint)
            except MemvaultError as exc:  # e.g. another embedding model: say so in the file
                rendered = render_error(query, str(exc))
            cached = self.results.store(name, rendered, version)
        return self._result_attrs(cached.inode, len(cached.data))

    @request
    async def setattr(self, inode, attr, fields, fh, ctx):
        record_id = self._record(inode)
        if (who := self._asker(ctx)) is not None:
            require_setattr(self._meta(record_id), who, attr, fields, by_path=fh is None)
        if fields.update_size:
            if attr.st_size > MAX_MEMORY_SIZE:
                raise TooLarge(f"inode {inode}", attr.st_size, MAX_MEMORY_SIZE)
            if record_id is None or self._meta(record_id).is_dir:
                raise IsADirectory(f"inode {inode}")
            self._truncate(record_id, attr.st_size)
        changes = {}
        if fields.update_mode:
            changes["mode"] = stat.S_IMODE(attr.st_mode)
        if fields.update_uid:
            changes["uid"] = attr.st_uid
        if fields.update_gid:
            changes["gid"] = attr.st_gid
        if fields.update_atime:
            changes["atime_ns"] = attr.st_atime_ns
        if fields.update_mtime:
            changes["mtime_ns"] = attr.st_mtime_ns
        elif fields.update_size:
            changes["mtime_ns"] = clock.now_ns()
        if changes:
            meta = self.vault.set_record_attrs(record_id, **changes)
            return self._attrs(meta, record_id)
        return self._attrs_of(record_id)

    def _truncate(self, record_id: bytes, size: int) -> Meta:
        meta = self.vault.resize_record(record_id, size)
        state = self.files.of_record(record_id)
        if state is not None:
            state.forget_chunks()
        return meta

    @request
    async def readlink(self, inode, ctx):
        record_id = self._record(inode)
        if record_id is None:
            raise BadPath("/", "not a symbolic link")
        self._may(record_id, ctx, 0)
        return os.fsencode(self.vault.readlink_record(record_id))

    @request
    async def access(self, inode, mode, ctx):
        """access(2) and chdir: asked only where the kernel leaves checks to the mount."""
        if inode >= SEARCH_INODE:  # search/ may be searched; its results only read
            return not mode & (W if inode == SEARCH_INODE else W | X)
        record_id = self._record(inode)
        if ctx.uid == ROOT_UID:
            return root_permitted(self._meta(record_id), mode)
        self._may(record_id, ctx, mode)
        return True

    @request
    async def statfs(self, ctx):
        disk = os.statvfs(self.vault.path.parent)
        out = pyfuse3.StatvfsData()
        out.f_bsize = disk.f_bsize
        out.f_frsize = disk.f_frsize
        out.f_blocks = disk.f_blocks
        out.f_bfree = disk.f_bfree
        out.f_bavail = disk.f_bavail
        out.f_files = self.vault.record_count + disk.f_ffree
        out.f_ffree = disk.f_ffree
        out.f_favail = disk.f_favail
        out.f_namemax = paths.MAX_NAME_BYTES
        return out

    # -- directories -----------------------------------------------------------

    @request
    async def opendir(self, inode, ctx):
        fh = next(self._dir_ids)
        if inode == SEARCH_INODE:
            self._dirs[fh] = [
                (os.fsencode(name), None, self._result_attrs(entry.inode, len(entry.data)))
                for name in self.results.names()
                if (entry := self.results.get(name)) is not None
            ]
            return fh
        # search/ is reachable by name but not listed: find, grep -r, tar and
        # rsync of the whole mount see memories, not query results.
        directory = self._record(inode)
        self._may(directory, ctx, R)
        self._dirs[fh] = [  # a snapshot: offsets survive concurrent changes
            (os.fsencode(name), record_id, self._attrs(meta, record_id))
            for name, record_id, meta in self.vault.listdir(directory)
        ]
        return fh

    @request
    async def readdir(self, fh, start_id, token):
        entries = self._dirs[fh]
        for index in range(start_id, len(entries)):
            name, _, attrs = entries[index]
            if not pyfuse3.readdir_reply(token, name, attrs, index + 1):
                break

    async def releasedir(self, fh):
        self._dirs.pop(fh, None)

    @request
    async def fsyncdir(self, fh, datasync):
        await self._durable(self.vault.sync)

    @request
    async def mkdir(self, parent_inode, name, mode, ctx):
        return self._create(parent_inode, name, DIRECTORY, stat.S_IMODE(mode), ctx)

    @request
    async def rmdir(self, parent_inode, name, ctx):
        parent, child = self._name(parent_inode, name)
        self._may_change(parent, ctx)
        record_id, _ = self.vault.lookup(parent, child)
        self.vault.remove_record(record_id, directory=True)

    @request
    async def unlink(self, parent_inode, name, ctx):
        # An open file stays readable and writable until its last close (release).
        parent, child = self._name(parent_inode, name)
        self._may_change(parent, ctx)
        self.vault.unlink_in(parent, child, is_open=self._is_open)

    @request
    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        old = self._name(parent_inode_old, name_old)
        new = self._name(parent_inode_new, name_new)
        if self._asker(ctx) is not None:
            self._may_move(old, new, flags, ctx)
        self.vault.move(
            *old,
            *new,
            replace_existing=not flags & pyfuse3.RENAME_NOREPLACE,
            exchange=bool(flags & pyfuse3.RENAME_EXCHANGE),
            is_open=self._is_open,
        )

    def _may_move(self, old: tuple, new: tuple, flags: int, ctx) -> None:
        """w and x on both directories, and w on a directory moved to another
        one (its ".." changes): the source, and with RENAME_EXCHANGE the target."""
        self._may_change(old[0], ctx)
        self._may_change(new[0], ctx)
        if old[0] != new[0]:
            for parent, name in (old, new) if flags & pyfuse3.RENAME_EXCHANGE else (old,):
                record_id, meta = self.vault.lookup(parent, name)
                if meta.is_dir:
                    self._may(record_id, ctx, W)

    def _is_open(self, record_id: bytes) -> bool:
        return self.files.of_record(record_id) is not None

    @request
    async def symlink(self, parent_inode, name, target, ctx):
        return self._create(parent_inode, name, SYMLINK, 0o777, ctx, os.fsdecode(target))

    @request
    async def link(self, inode, new_parent_inode, new_name, ctx):
        raise NotSupported("Hard links")

    @request
    async def mknod(self, parent_inode, name, mode, rdev, ctx):
        if not stat.S_ISREG(mode):
            raise NotSupported("Device nodes, FIFOs and sockets")
        return self._create(parent_inode, name, FILE, stat.S_IMODE(mode), ctx)

    # -- files -----------------------------------------------------------------

    def _create(
        self,
        parent_inode: int,
        name: bytes,
        kind: int,
        mode: int,
        ctx,
        target: str = "",
        opened: bool = False,
    ) -> pyfuse3.EntryAttributes:
        """A new entry, owned by the caller (root may create entries for others)."""
        parent, child = self._name(parent_inode, name)
        self._may_change(parent, ctx)
        record_id, meta = self.vault.create_in(
            parent, child, kind, mode=mode, uid=ctx.uid, gid=ctx.gid, target=target, opened=opened
        )
        return self._attrs(meta, record_id)

    @request
    async def create(self, parent_inode, name, mode, flags, ctx):
        attrs = self._create(parent_inode, name, FILE, stat.S_IMODE(mode), ctx, opened=True)
        fh, _ = self.files.open(self.inodes.record(attrs.st_ino))
        self._openers[fh] = current_caller.get()
        return pyfuse3.FileInfo(fh=fh, keep_cache=True), attrs

    @request
    async def open(self, inode, flags, ctx):
        if inode > SEARCH_INODE:
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
                raise ReadOnlyName("search/")
            name = self.results.name_of(inode)
            cached = self.results.get(name) if name is not None else None
            if cached is None:
                raise MemoryNotFound(f"search/ inode {inode}")
            fh = next(self._result_fhs)
            self._result_handles[fh] = cached.data
            return pyfuse3.FileInfo(fh=fh)  # the kernel drops its pages: never stale
        record_id = self._record(inode)
        meta = self._meta(record_id)
        if meta.type != FILE:
            raise (IsADirectory if meta.is_dir else IsASymlink)(meta.path)
        self._may(record_id, ctx, _wanted(flags))
        if flags & os.O_TRUNC:  # libfuse asks for atomic O_TRUNC: truncating is ours
            meta = self._truncate(record_id, 0)
        elif self.files.of_record(record_id) is None:
            self._hand_pages(record_id, meta)
        if flags & os.O_ACCMODE != os.O_WRONLY:
            self.vault.note_read(record_id)
        fh, _ = self.files.open(record_id)
        self._openers[fh] = current_caller.get()
        return pyfuse3.FileInfo(fh=fh, keep_cache=not flags & os.O_TRUNC)

    @request
    async def read(self, fh, off, size):
        if fh >= RESULT_FH_BASE:
            return self._result_handles[fh][off : off + size]
        state = self.files.get(fh)
        meta = self._meta(state.record_id)
        end = min(off + size, meta.size)
        if off >= end:
            return b""
        step = self._chunk_size
        first, last = off // step, (end - 1) // step
        if meta.chunked and last > first:  # a large read (the kernel asks 1 MiB at once)
            start = first * step
            return memoryview(self.vault.read_span(state.record_id, first, last - first + 1))[
                off - start : end - start
            ]
        parts = []
        for index in range(first, last + 1):
            start = index * step
            chunk = memoryview(self._chunk(state, index, meta))
            parts.append(chunk[max(off - start, 0) : end - start])
        if not meta.chunked and off == 0 and end == meta.size:  # the kernel's pages: all of it
            self.recent.mark_cached(state.record_id, meta.body_gen)
        return b"".join(parts)

    @request
    async def write(self, fh, off, buf):
        """Committed before it returns: the touched chunks re-sealed, in the journal."""
        if fh >= RESULT_FH_BASE:
            raise ReadOnlyName("search/")
        state = self.files.get(fh)
        end = off + len(buf)
        if end > MAX_MEMORY_SIZE:
            raise TooLarge(f"handle {fh}", end, MAX_MEMORY_SIZE)
        if not buf:
            return 0
        current_caller.set(self._openers.get(fh, THE_VAULT))
        old = self._meta(state.record_id)
        old_size = old.size
        size = max(old_size, end)
        data = memoryview(buf)
        changed = {}
        step = self._chunk_size
        for index in range(off // step, (end - 1) // step + 1):
            start = index * step
            lo, hi = max(off, start) - start, min(end, start + step) - start
            length = min(step, size - start)
            part = data[start + lo - off : start + hi - off]
            if lo == 0 and hi >= length:  # all of it new: no read
                # A whole chunk is kept as a view of the request (immutable bytes:
                # never extended, so never copied); a file's short last one is copied.
                changed[index] = part if len(part) == step else bytearray(part)
                continue
            if start >= old_size:
                chunk = bytearray(length)  # nothing of it stored yet: no read
            else:  # a copy: the kept chunk changes only once the write is committed
                chunk = bytearray(self._chunk(state, index, old))
            if len(chunk) < length:
                chunk.extend(bytes(length - len(chunk)))
            chunk[lo:hi] = part
            changed[index] = chunk
        # Pages the kernel held whole stay whole as it writes through them.
        cached = not old.chunked and self.recent.cached(state.record_id, old.body_gen)
        meta = self.vault.write_chunks(state.record_id, changed, size)
        for index, chunk in changed.items():
            state.remember(index, chunk)
        if not meta.chunked:  # the whole content: the next open decrypts nothing
            self.recent.put(state.record_id, meta.body_gen, bytes(changed[0]), cached=cached)
        return len(buf)

    @request
    async def flush(self, fh):
        # Every write is committed already: answering ENOSYS once tells the
        # kernel never to send FLUSH again, so close() costs no round trip.
        raise pyfuse3.FUSEError(errno.ENOSYS)

    @request
    async def fsync(self, fh, datasync):
        if fh < RESULT_FH_BASE:
            await self._durable(self.vault.sync_files)

    @request
    async def release(self, fh):
        if fh >= RESULT_FH_BASE:
            self._result_handles.pop(fh, None)
            return
        state = self.files.close(fh)
        current_caller.set(self._openers.pop(fh, THE_VAULT))
        if not state.handles:
            meta = self.vault.by_record_id(state.record_id)
            if meta is not None and meta.orphan:  # unlinked while open: shredded now
                self.vault.remove_record(state.record_id, directory=False)
        self.vault.store_new_files()

    def _hand_pages(self, record_id: bytes, meta: Meta) -> None:
        """Put a small file's content in the kernel's page cache as it is opened, so
        its reads are answered there, without a READ.

        The kernel keeps the pages a write() filled whole; a small file's one
        page is never whole, so its first read would ask us again. Handed over
        once per content (RecentBodies knows which the kernel holds: what it
        was given or read whole, and what it wrote through pages it held), at
        an open, not when a writer closes: a file written and never read costs
        nothing. Only at the first open of the file: a reader waiting for our
        READ reply holds its page locked, and the store waits for that lock,
        on the trio thread, which would never reply; with no handle open there
        is no such reader."""
        content = None if meta.chunked else self.recent.to_hand_over(record_id, meta.body_gen)
        if not content or len(content) != meta.size:
            return
        inode = self.inodes.inode(record_id)
        with contextlib.suppress(OSError):  # the kernel forgot the inode: nothing to serve
            pyfuse3.notify_store(inode, 0, content)
            now = self.vault.by_record_id(record_id)
            if now is None or now.body_gen != meta.body_gen:  # a sync changed it meanwhile
                pyfuse3.invalidate_inode(inode)

    # -- extended attributes (user.* only, stored inside the sealed metadata) ----
    #
    # Served only when the mount was asked for them (`unlock --xattrs`). The
    # kernel asks for security.capability before every write() to a file that
    # may have one; an ENOSYS answer tells it, once, that the file system has
    # no extended attributes at all (it then answers "not supported" itself),
    # which saves that round trip on every write. Those stored stay stored.

    def _xattr_name(self, name: bytes) -> str:
        if not self.xattrs:
            raise pyfuse3.FUSEError(errno.ENOSYS)
        text = os.fsdecode(name)
        if not text.startswith(XATTR_NAMESPACE):
            raise NotSupported(f"Extended attributes outside {XATTR_NAMESPACE}*")
        return text

    @request
    async def setxattr(self, inode, name, value, ctx):
        key = self._xattr_name(name)
        record_id = self._record(inode)
        self._may(record_id, ctx, W)
        xattrs = dict(self._meta(record_id).xattrs)
        xattrs[key] = base64.b64encode(value).decode()
        self.vault.set_record_attrs(record_id, xattrs=xattrs)

    @request
    async def getxattr(self, inode, name, ctx):
        key = self._xattr_name(name)
        if inode >= SEARCH_INODE:
            raise NoSuchAttribute("search/", key)
        record_id = self._record(inode)
        self._may(record_id, ctx, R)
        value = self._meta(record_id).xattrs.get(key)
        if value is None:
            raise NoSuchAttribute(f"inode {inode}", key)
        return base64.b64decode(value)

    @request
    async def listxattr(self, inode, ctx):
        if not self.xattrs:
            raise pyfuse3.FUSEError(errno.ENOSYS)
        if inode >= SEARCH_INODE:
            return []
        record_id = self._record(inode)
        self._may(record_id, ctx, 0)  # listing names needs no permission on the file
        return [os.fsencode(k) for k in self._meta(record_id).xattrs]

    @request
    async def removexattr(self, inode, name, ctx):
        key = self._xattr_name(name)
        record_id = self._record(inode)
        self._may(record_id, ctx, W)
        xattrs = dict(self._meta(record_id).xattrs)
        if xattrs.pop(key, None) is None:
            raise NoSuchAttribute(f"inode {inode}", key)
        self.vault.set_record_attrs(record_id, xattrs=xattrs)

    def _meta(self, record_id: bytes | None) -> Meta:
        meta = self.vault.by_record_id(record_id)
        if meta is None:
            raise MemoryNotFound(f"record {record_id.hex() if record_id else '/'}")
        return meta
