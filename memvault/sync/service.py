"""Syncing a vault that stays open: one thread runs every sync of it.

A mount's daemon (the vault's only writer) hands `memvault sync` requests
to this thread, and while *watching* the thread also syncs by itself: after
a local change, once the mount has been quiet for a moment (so a burst of
writes is sent in one log entry), and whenever the remote's listing changed
since it last looked (one cheap request every POLL_S through the rclone rcd
it keeps open). An unreachable remote is retried later, less and less often;
a remote that fails its checks stops the watching (nothing is applied) until
someone asks for a sync again. `memvault sync --watch` on a locked vault runs
the same loop in the foreground.

One thread does it all, so two syncs of one vault never run at once (they
would number their log entries alike), and the rclone rcd lives as long as
the thread that started it (remote.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..crypto.kdf import KdfParams
from ..errors import DeviceRemoved, MemvaultError, NotSynced, RemoteTampered, UsageError
from . import group
from .engine import Report, Sync
from .remote import RcloneRemote, rclone_remote
from .state import SyncState, load, save, share_names

log = logging.getLogger("memvault.sync")

POLL_S = 2.0
"""While watching: how often the remote's listing is compared with the last one."""
QUIET_S = 0.5
"""A local change is sent once the mount has had no request for this long..."""
PATIENCE_S = 5.0
"""...or this long after the change, under writes that never pause."""
RESCAN_S = 60.0
"""A full sync at least this often (changes no notification announces, e.g. mkdir)."""
BACKOFF_MAX_S = 120.0


def _kdf(request: dict[str, Any]) -> KdfParams:
    """The Argon2id cost for a new passphrase (a share code needs none to speak of)."""
    if not request.get("kdf"):
        return group.SHARE_KDF
    kdf = KdfParams.from_dict(request["kdf"])
    kdf.validate()
    return kdf


@dataclass
class _Ask:
    request: dict[str, Any]
    done: threading.Event = field(default_factory=threading.Event)
    answer: dict[str, Any] | None = None
    error: BaseException | None = None


class SyncService:
    """The syncs of one open vault, in a thread of their own."""

    def __init__(
        self,
        vault,
        *,
        on_applied: Callable[[set[str]], None] | None = None,
        on_report: Callable[[Report], None] | None = None,
        watch: bool | None = None,
        share: str | None = None,
    ) -> None:
        """``on_applied(paths)``: the sync changed these paths here (a mount drops
        the kernel's caches of them). ``on_report``: every sync that did something.
        ``watch``: forced on or off (the foreground loop); None: as the vault says.
        ``share``: the team space this service syncs (None: the personal group)."""
        self.vault = vault
        self.share = share
        self._on_applied = on_applied or (lambda touched: None)
        self._on_report = on_report or (lambda report: None)
        self._forced_watch = watch
        self._cond = threading.Condition()
        self._asked: list[_Ask] = []
        self._stopped = False
        self._watching = False
        self._dirty_since: float | None = None
        self._next_poll = 0.0
        self._last_full = 0.0
        self._failures = 0
        self._listing: dict[str, int] | None = None
        self._remote: RcloneRemote | None = None
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="memvault-sync", daemon=True)
        self.label = f"shared/{share}" if share else "personal"
        vault.add_listener(self._changed)

    # -- life -----------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()

    def serve(self, request: dict[str, Any]) -> dict[str, Any]:
        """A `memvault sync` request (``action``: now, status, watch, unwatch;
        ``compact``: the whole log now), answered by the sync thread; blocks until it is."""
        ask = _Ask(request)
        with self._cond:
            if self._stopped:
                raise MemvaultError("The vault is being locked.")
            self._asked.append(ask)
            self._cond.notify_all()
        ask.done.wait()
        if ask.error is not None:
            raise ask.error
        assert ask.answer is not None
        return ask.answer

    def _changed(self, *event: object) -> None:
        """A vault listener: something changed here (not by this thread's own syncs)."""
        if threading.current_thread() is self._thread or not self._watching:
            return
        with self._cond:
            if self._dirty_since is None:
                self._dirty_since = time.monotonic()
                self._cond.notify_all()

    # -- the thread -----------------------------------------------------------------

    def _loop(self) -> None:
        try:
            state = load(self.vault, self.share)
            self._watching = (
                self._forced_watch
                if self._forced_watch is not None
                else bool(state is not None and state.watch)
            )
            while True:
                with self._cond:
                    while not (self._stopped or self._asked) and (wait := self._wait()) > 0:
                        self._cond.wait(wait)
                    if self._stopped:
                        break
                    ask = self._asked.pop(0) if self._asked else None
                if ask is not None:
                    self._answer(ask)
                else:
                    self._watch_once()
        finally:
            with self._cond:
                left, self._asked = self._asked, []
            for ask in left:
                ask.error = MemvaultError("The vault is being locked.")
                ask.done.set()
            if self._remote is not None:
                self._remote.close()

    def _wait(self) -> float:
        """Seconds until the watching has something to do (0: now)."""
        if not self._watching:
            return 3600.0
        now = time.monotonic()
        wait = self._next_poll - now
        if self._dirty_since is not None and not self._failures:  # failing: at the next poll
            if now - self._dirty_since >= PATIENCE_S or self.vault.activity.idle_for() >= QUIET_S:
                return 0.0
            wait = min(wait, 0.1)
        return wait

    def _answer(self, ask: _Ask) -> None:
        try:
            ask.answer = self._handle(ask.request)
        except BaseException as exc:  # handed to the asking thread, raised there
            ask.error = exc
        finally:
            ask.done.set()

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        action = request.get("action", "now")
        if action in ("create", "join"):
            return self._enter(request)
        state = self._state()
        if action == "remove":
            self._sync(state)  # the device's last changes that reached the remote count
            secret = bytearray(request["secret"].encode())
            remote = self._remote_for(state)
            group.remove_device(self.vault, remote, state, request["device"], secret, _kdf(request))
            return {"sentence": f"Removed {request['device']!r}.", "watching": self._watching}
        if action == "status":
            report = group.status(self.vault, state)
            report["watching"] = self._watching
            report["last_error"] = self.last_error
            return report
        if action in ("watch", "unwatch"):
            state.watch = self._watching = action == "watch"
            save(self.vault, state)
            self._next_poll = 0.0
        report = self._sync(state, compact=bool(request.get("compact")))
        return {"sentence": report.sentence(), "watching": self._watching}

    def _enter(self, request: dict[str, Any]) -> dict[str, Any]:
        """Start (``create``) or join a group at ``request["remote"]``: this service's
        team space, or the personal group (``share`` None)."""
        if self._remote is not None:
            self._remote.close()
        self._remote = rclone_remote(request["remote"], request.get("config"))
        secret = bytearray(request["secret"].encode())
        options = {"name": request.get("name"), "config": request.get("config")}
        if request["action"] == "create":
            state = group.start(
                self.vault, self._remote, secret, kdf=_kdf(request), share=self.share, **options
            )
        else:
            opened = group.open_group(self._remote, secret)
            state = group.join(self.vault, self._remote, opened, share=self.share, **options)
        report = self._sync(state)
        return {"sentence": report.sentence(), "device": state.name, "watching": False}

    def _watch_once(self) -> None:
        now = time.monotonic()
        try:
            local = self._dirty_since is not None or now - self._last_full >= RESCAN_S
            if local or self._remote_changed():
                self._sync(self._state())
            self._failures = 0
            self.last_error = None
        except (RemoteTampered, DeviceRemoved) as exc:  # until someone asks again
            self._watching = False
            self.last_error = str(exc)
            log.error("sync stopped watching: %s", exc)
        except (MemvaultError, OSError) as exc:
            self._failures += 1
            self.last_error = str(exc)
            log.warning("sync failed (retried later): %s", exc)
        finally:
            pause = POLL_S * 2 ** min(self._failures, 6)
            self._next_poll = time.monotonic() + min(pause, BACKOFF_MAX_S)

    def _remote_changed(self) -> bool:
        state = self._state()
        return self._remote_for(state).list() != self._listing

    # -- one sync ---------------------------------------------------------------------

    def _state(self) -> SyncState:
        state = load(self.vault, self.share)
        if state is None:
            raise NotSynced()
        return state

    def _remote_for(self, state: SyncState) -> RcloneRemote:
        remote = self._remote
        if remote is None or (remote.spec, remote.config) != (state.remote, state.rclone_config):
            if remote is not None:
                remote.close()
            remote = self._remote = rclone_remote(state.remote, state.rclone_config)
        return remote

    def _sync(self, state: SyncState, *, compact: bool = False) -> Report:
        with self._cond:
            self._dirty_since = None  # what changes from now on is for the next sync
        self._last_full = time.monotonic()
        sync = Sync(self.vault, state, self._remote_for(state))
        try:
            report = sync.run(compact=compact)
        except BaseException:
            with self._cond:  # not sent: sent by the next one
                self._dirty_since = self._dirty_since or time.monotonic()
            raise
        finally:
            if sync.listing:
                self._listing = sync.listing
        if report.touched:
            self._on_applied(report.touched)
        if report.changed_anything:
            self._on_report(report)
        return report


class SyncServices:
    """Every group of one open vault (the personal one, each team space), each in
    its own thread: a request goes to all of them."""

    def __init__(self, vault, **options: Any) -> None:
        groups = ([None] if load(vault) is not None else []) + share_names(vault)
        self.vault = vault
        self._options = options
        self.services = [SyncService(vault, share=share, **options) for share in groups]

    def start(self) -> None:
        for service in self.services:
            service.start()

    def stop(self) -> None:
        for service in self.services:
            service.stop()

    @property
    def last_error(self) -> str | None:
        return next((s.last_error for s in self.services if s.last_error), None)

    def serve(self, request: dict[str, Any]) -> dict[str, Any]:
        """Status: the personal group's, with ``shares`` (each space's). Otherwise
        ``sentences``: one per group; a group that fails does not stop the others,
        its error is raised afterwards."""
        if request.get("action") in ("create", "join", "remove"):
            return self._one_group(request)
        if not self.services:
            raise NotSynced()
        answers, failed = [], None
        for service in self.services:
            try:
                answers.append((service, service.serve(request)))
            except MemvaultError as exc:
                failed = failed or exc
        if request.get("action") == "status":
            if failed is not None:
                raise failed
            personal = next((a for s, a in answers if s.share is None), {})
            return {**personal, "shares": [a for s, a in answers if s.share is not None]}
        named = len(self.services) > 1
        sentences = [f"{s.label}: {a['sentence']}" if named else a["sentence"] for s, a in answers]
        if failed is not None:
            for line in sentences:
                log.info(line)
            raise failed
        return {"sentences": sentences, "watching": any(a["watching"] for _, a in answers)}

    def _one_group(self, request: dict[str, Any]) -> dict[str, Any]:
        """Create or join a team space (a new service, kept if it worked), or remove a
        device from one group (``share``: which; None: the personal group)."""
        share = request.get("share")
        if request["action"] == "remove":
            found = [s for s in self.services if s.share == share]
            if not found:
                if share is None:
                    raise NotSynced()
                raise UsageError(
                    f"This vault is in no team space {share!r} (see `memvault share list`)."
                )
            return found[0].serve(request)
        service = SyncService(self.vault, share=share, **self._options)
        service.start()
        try:
            answer = service.serve(request)
        except BaseException:
            service.stop()
            raise
        self.services.append(service)
        return answer
