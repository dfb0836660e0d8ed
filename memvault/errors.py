"""Errors a user can act on. Each docstring is the message, formatted with the
exception's arguments (the borgbackup convention), and each carries the errno
the filesystem layer answers with."""

from __future__ import annotations

import errno as _errno


class MemvaultError(Exception):
    """memvault failed: {0}"""

    errno = _errno.EIO
    exit_code = 1

    def __str__(self) -> str:
        return (self.__doc__ or "").format(*self.args).strip()


class VaultNotFound(MemvaultError):
    """No vault at {0}: create one with `memvault init`, or point --vault / MEMVAULT_VAULT at it."""

    errno = _errno.ENOENT


class VaultExists(MemvaultError):
    """A vault already exists at {0}; refusing to overwrite it."""

    errno = _errno.EEXIST


class VaultUnreadable(MemvaultError):
    """Cannot open the vault {0}: {1}."""

    errno = _errno.EACCES


class NotAVault(MemvaultError):
    """{0} is not a memvault vault."""


class UnsupportedFormat(MemvaultError):
    """The vault {0} uses format version {1}; this memvault reads version {2}."""


class WrongPassphrase(MemvaultError):
    """Wrong passphrase for the vault {0}."""

    errno = _errno.EACCES


class UnreasonableKdf(MemvaultError):
    """Keyslot {0} asks for an unreasonable KDF cost ({1}; {2}); \
the vault may have been tampered with."""


class VaultCorrupted(MemvaultError):
    """The vault {0} is damaged ({1}); restore it from a backup or run `memvault status`."""


class VaultTampered(MemvaultError):
    """The vault {0} failed its integrity check: {1}."""


class VaultDamaged(MemvaultError):
    """The vault {0} has {1} damaged record(s): {2}. `memvault repair` drops them (and \
recovers what it can); until then the vault opens read-only (`memvault get`, `ls`)."""


class JournalDamaged(VaultTampered):
    """The journal of the vault {0} {1}, although no restart happened since it was \
written: recent changes would be lost. Restore the journal file, or run the command again \
with --accept-journal-loss to open the vault with the changes that verify."""


class MemoryCorrupted(MemvaultError):
    """The memory {0!r} failed its integrity check: its stored bytes were damaged or altered."""


class VaultInUse(MemvaultError):
    """The vault {0} is in use by another memvault process{1}; lock it or stop that process."""

    errno = _errno.EBUSY


class VaultLocked(MemvaultError):
    """The vault was locked; {0} is no longer its mount, so nothing more was written there."""

    errno = _errno.ENOTCONN


class ReadOnlyVault(MemvaultError):
    """The vault {0} is open read-only; nothing can be changed."""

    errno = _errno.EROFS


class DiskFull(MemvaultError):
    """The disk holding {0} is full; nothing was changed. Free some space and try again."""

    errno = _errno.ENOSPC


class CompactionOwed(MemvaultError):
    """The vault {0} is locked, but shredded or overwritten memories are still in its file \
({1}); the next `memvault unlock` (or any command that writes) finishes them."""


class CompactionPending(MemvaultError):
    """Shredded memories are unreadable, but their bytes are still in {0} ({1}); \
run `memvault compact` once that is fixed."""

    errno = _errno.ENOSPC


class ModelMismatch(MemvaultError):
    """The vault's search index was made with another embedding model (sha256 {0}…, \
this one is {1}…); run `memvault reindex` to re-embed every memory with this one."""


class BadPath(MemvaultError):
    """Invalid memory path {0!r}: {1}."""

    errno = _errno.EINVAL


class PathTooLong(BadPath):
    """Invalid memory path {0!r}: {1}."""

    errno = _errno.ENAMETOOLONG


class MemoryNotFound(MemvaultError):
    """No memory at {0!r}."""

    errno = _errno.ENOENT


class IsADirectory(MemvaultError):
    """{0!r} is a directory."""

    errno = _errno.EISDIR


class NotADirectory(MemvaultError):
    """{0!r} is not a directory."""

    errno = _errno.ENOTDIR


class DirectoryNotEmpty(MemvaultError):
    """The directory {0!r} is not empty."""

    errno = _errno.ENOTEMPTY


class AlreadyExists(MemvaultError):
    """{0!r} already exists."""

    errno = _errno.EEXIST


class InvalidMove(MemvaultError):
    """Cannot move {0!r} to {1!r}: {2}."""

    errno = _errno.EINVAL


class TooLarge(MemvaultError):
    """{0!r} would be {1} bytes; a memory holds at most {2} bytes."""

    errno = _errno.EFBIG


class PassphraseError(MemvaultError):
    """{0}"""

    errno = _errno.EINVAL


class QueryTooLong(MemvaultError):
    """The query is too long to ask through the mount ({0} bytes as a search/ file name, \
at most {1}); shorten it to its key words."""

    errno = _errno.ENAMETOOLONG


class SourceNotFound(MemvaultError):
    """Nothing to import at {0}: give an existing file or directory to --source."""

    errno = _errno.ENOENT
