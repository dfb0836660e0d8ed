"""Errors a user can act on. Each docstring is the message, formatted with the
exception's arguments (the borgbackup convention); each carries the exit
status the CLI ends with and the errno the filesystem answers with, so both
mappings live here, with the classes.

Exit statuses (also in `memvault --help`):

====  =====================================================================
0     done
1     failed (a full disk, an unsupported format, anything else)
2     usage: a bad option, argument, path or query
3     not found: no such vault, memory or source
4     wrong passphrase or recovery key, a missing or wrong keyfile
5     the vault is locked (or was locked while the command ran)
6     in use: another process has the vault open, or it is already unlocked
7     damaged or tampered: a record, the journal or the file failed its check
130   interrupted (Ctrl-C)
====  =====================================================================
"""

from __future__ import annotations

import errno as _errno
import os as _os

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_PASSPHRASE = 4
EXIT_LOCKED = 5
EXIT_IN_USE = 6
EXIT_DAMAGED = 7
EXIT_INTERRUPTED = 130

EXIT_STATUSES = {
    0: "done",
    EXIT_FAILED: "failed",
    EXIT_USAGE: "usage error (a bad option, argument, path or query)",
    EXIT_NOT_FOUND: "no such vault, memory or source",
    EXIT_PASSPHRASE: "wrong passphrase or recovery key, a missing or wrong keyfile",
    EXIT_LOCKED: "the vault is locked",
    EXIT_IN_USE: "the vault is in use by another process, or already unlocked",
    EXIT_DAMAGED: "the vault is damaged or was tampered with",
    EXIT_INTERRUPTED: "interrupted",
}


class MemvaultError(Exception):
    """memvault failed: {0}"""

    errno = _errno.EIO
    exit_code = EXIT_FAILED

    def __str__(self) -> str:
        return (self.__doc__ or "").format(*self.args).strip()


class VaultNotFound(MemvaultError):
    """No vault at {0}: create one with `memvault init`, or point --vault / MEMVAULT_VAULT at it."""

    exit_code = EXIT_NOT_FOUND
    errno = _errno.ENOENT


class VaultExists(MemvaultError):
    """A vault already exists at {0}; refusing to overwrite it."""

    errno = _errno.EEXIST


class VaultUnreadable(MemvaultError):
    """Cannot open the vault {0}: {1}."""

    errno = _errno.EACCES


class NotAVault(MemvaultError):
    """{0} is not a memvault vault."""

    exit_code = EXIT_DAMAGED


class UnsupportedFormat(MemvaultError):
    """The vault {0} uses format version {1}; this memvault reads versions {2}."""


class WrongPassphrase(MemvaultError):
    """Wrong passphrase for the vault {0}."""

    exit_code = EXIT_PASSPHRASE
    errno = _errno.EACCES


class UnreasonableKdf(MemvaultError):
    """Keyslot {0} asks for an unreasonable KDF cost ({1}; memvault writes and accepts {2}): \
the vault's header was edited or damaged, so nothing was derived; the vault may have been \
tampered with."""

    exit_code = EXIT_DAMAGED


class KeyfileMissing(MemvaultError):
    """Keyslot(s) {0} of the vault {1} need a keyfile as well as the passphrase: give \
--keyfile PATH or set MEMVAULT_KEYFILE (the passphrase was not tried)."""

    exit_code = EXIT_PASSPHRASE
    errno = _errno.EACCES


class WrongKeyfile(MemvaultError):
    """The keyfile {0} is not the one keyslot(s) {1} of the vault need (the passphrase \
was not tried)."""

    exit_code = EXIT_PASSPHRASE
    errno = _errno.EACCES


class KeyfileUnreadable(MemvaultError):
    """Cannot read the keyfile {0}: {1}."""

    exit_code = EXIT_NOT_FOUND


class KeyfileExists(MemvaultError):
    """{0} already exists; refusing to overwrite it (to use that file as the keyfile, \
give it with --keyfile)."""


class WrongRecoveryKey(MemvaultError):
    """Wrong recovery key for the vault {0}."""

    exit_code = EXIT_PASSPHRASE
    errno = _errno.EACCES


class RecoveryKeyTypo(MemvaultError):
    """That is not a recovery key ({0}): check it against the copy you kept; nothing was \
tried."""

    exit_code = EXIT_USAGE


class NoRecoveryKey(MemvaultError):
    """The vault {0} has no recovery key (`memvault recovery enable` adds one)."""

    exit_code = EXIT_NOT_FOUND


class KeyslotRefused(MemvaultError):
    """{0}"""

    exit_code = EXIT_USAGE


class VaultCorrupted(MemvaultError):
    """The vault {0} is damaged ({1}); restore it from a backup or run `memvault status`."""

    exit_code = EXIT_DAMAGED


class VaultTampered(MemvaultError):
    """The vault {0} failed its integrity check: {1}."""

    exit_code = EXIT_DAMAGED


class VaultDamaged(MemvaultError):
    """The vault {0} has {1} damaged record(s): {2}. `memvault repair` drops them (and \
recovers what it can); until then the vault opens read-only (`memvault get`, `ls`)."""

    exit_code = EXIT_DAMAGED


class CheckFailed(MemvaultError):
    """{0} has {1} problem(s), listed above: `memvault repair` drops damaged records, \
`memvault salvage OUT` copies what can be read into a new vault."""

    exit_code = EXIT_DAMAGED


class JournalDamaged(VaultTampered):
    """The journal of the vault {0} {1}, although no restart happened since it was \
written: recent changes would be lost. Restore the journal file, or run the command again \
with --accept-journal-loss to open the vault with the changes that verify."""


class MemoryCorrupted(MemvaultError):
    """The memory {0!r} failed its integrity check: its stored bytes were damaged or altered."""

    exit_code = EXIT_DAMAGED


class VaultInUse(MemvaultError):
    """The vault {0} is in use by another memvault process{1}; lock it or stop that process."""

    exit_code = EXIT_IN_USE
    errno = _errno.EBUSY


class VaultLocked(MemvaultError):
    """The vault was locked; {0} is no longer its mount, so nothing more was written there."""

    exit_code = EXIT_LOCKED
    errno = _errno.ENOTCONN


class NotUnlocked(MemvaultError):
    """The vault {0} is not unlocked: run `memvault unlock` first."""

    exit_code = EXIT_LOCKED
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

    exit_code = EXIT_USAGE
    errno = _errno.EINVAL


class PathTooLong(BadPath):
    """Invalid memory path {0!r}: {1}."""

    errno = _errno.ENAMETOOLONG


class MemoryNotFound(MemvaultError):
    """No memory at {0!r}."""

    exit_code = EXIT_NOT_FOUND
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


class DestinationExists(MemvaultError):
    """{0} already exists; memvault never writes a copy over a file: choose another name."""

    exit_code = EXIT_USAGE


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

    exit_code = EXIT_USAGE
    errno = _errno.EINVAL


class QueryTooLong(MemvaultError):
    """The query is too long to ask through the mount ({0} bytes as a search/ file name, \
at most {1}); shorten it to its key words."""

    exit_code = EXIT_USAGE
    errno = _errno.ENAMETOOLONG


class CopyNotFound(MemvaultError):
    """No file at {0}: give the path of a vault file or a backup of one."""

    exit_code = EXIT_NOT_FOUND
    errno = _errno.ENOENT


class SourceNotFound(MemvaultError):
    """Nothing to import at {0}: give an existing file or directory to --source."""

    exit_code = EXIT_NOT_FOUND
    errno = _errno.ENOENT


class UsageError(MemvaultError):
    """{0}"""

    exit_code = EXIT_USAGE
    errno = _errno.EINVAL


class AlreadyUnlocked(MemvaultError):
    """The vault {0} is already unlocked at {1} (pid {2})."""

    exit_code = EXIT_IN_USE
    errno = _errno.EBUSY


class NotSupported(MemvaultError):
    """{0} are not supported."""

    errno = _errno.ENOTSUP


class ReadOnlyName(MemvaultError):
    """{0!r} is read-only."""

    errno = _errno.EROFS


class NoSuchAttribute(MemvaultError):
    """{0!r} has no extended attribute {1!r}."""

    errno = _errno.ENODATA  # ENOATTR on Linux


class DaemonFailed(MemvaultError):
    """{0}"""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


_BY_ERRNO: dict[int, type[MemvaultError]] = {
    cls.errno: cls
    for cls in (
        MemoryNotFound,
        IsADirectory,
        NotADirectory,
        DirectoryNotEmpty,
        AlreadyExists,
        DiskFull,
        ReadOnlyName,
    )
}


def from_errno(code: int | None, path: str) -> MemvaultError:
    """The error a file operation on ``path`` met, as the vault would have raised it:
    the reverse of each class's ``errno``."""
    if code == _errno.ELOOP:  # a symlink where a directory was needed: never followed
        return NotADirectory(path)
    if code in _BY_ERRNO:
        return _BY_ERRNO[code](path)
    if code in (_errno.EINVAL, _errno.ENAMETOOLONG):
        return BadPath(path, "refused by the filesystem")
    return MemvaultError(f"{path}: {_os.strerror(code or _errno.EIO)}")


class IsASymlink(MemvaultError):
    """{0!r} is a symbolic link."""

    errno = _errno.ELOOP


# -- sync (sync/) -----------------------------------------------------------------------


class RemoteUnavailable(MemvaultError):
    """The sync remote {0} could not be reached ({1}); nothing was lost: sync again later."""


class RemoteTampered(MemvaultError):
    """The sync remote {0} failed its check: {1}; nothing was applied."""

    exit_code = EXIT_DAMAGED


class DeviceRemoved(MemvaultError):
    """This device was removed from the sync group at {0} by {1}; its memories stay here."""


class NotSynced(MemvaultError):
    """This vault is in no sync group: see `memvault sync init` and `memvault sync join`."""

    exit_code = EXIT_NOT_FOUND


class AlreadySynced(MemvaultError):
    """This vault already syncs with {0}."""

    exit_code = EXIT_USAGE


class WrongSyncPassphrase(MemvaultError):
    """Wrong passphrase for the sync group at {0}."""

    exit_code = EXIT_PASSPHRASE


class NoSyncGroup(MemvaultError):
    """No sync group at {0}: start one there with `memvault sync init {0}`."""

    exit_code = EXIT_NOT_FOUND


class SyncGroupExists(MemvaultError):
    """{0} already holds a sync group: join it with `memvault sync join {0}`."""

    exit_code = EXIT_USAGE
