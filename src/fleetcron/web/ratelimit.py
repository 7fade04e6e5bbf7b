"""Failed-login throttling, per client address and per account (in memory, per process).

The policy, decided with the owner of an account in mind (see docs/web.md, "Logging in"):

- **Per address**: at most ``per_address`` failed checks within ``window``; further attempts
  from that address are refused (429) until old failures age out.
- **Per account**: the first ``per_account`` failures are free; after that each further
  check has to wait ``base_delay * 2**(failures - per_account)`` (at most ``max_delay``) after
  the previous failure. An attacker is slowed to one guess per ``max_delay``, but cannot lock
  the owner out for good: an address that logged in to the account successfully before is
  not delayed (only its own per-address limit applies), and from a new address the owner
  waits at most ``max_delay``. Failures are forgotten ``forget_after`` after the last one.
- **Atomic**: :meth:`LoginLimiter.reserve` decides and records the attempt under one lock
  *before* the password is hashed, so concurrent requests cannot all pass a check that each
  of them saw before any of them failed. A successful login gives the reservation back.
- **Bounded hashing**: :meth:`LoginLimiter.hashing` admits at most ``hash_slots`` argon2
  checks at a time (each costs 64 MiB); the rest wait up to ``hash_wait_s`` and are then
  refused as busy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

#: refused attempts are audited at these counts per address and window (1, 10, 100, ...)
#: rather than one row each, so a flood of refusals leaves a handful of rows
AUDIT_AT_POWERS_OF = 10
#: beyond this many remembered accounts and addresses, idle ones are forgotten (names are
#: the attacker's text: the memory must stay bounded)
PRUNE_ABOVE = 10_000


@dataclass(frozen=True)
class Reservation:
    """An attempt admitted to a password check (already counted as a failure)."""

    account: str
    address: str
    at: datetime


@dataclass(frozen=True)
class Refusal:
    """An attempt refused before any check: why, and until when."""

    reason: str  # "address" or "account"
    retry_at: datetime
    #: how many attempts this address had refused in the current window, this one included
    refused: int

    @property
    def audit_now(self) -> bool:
        """Whether this refusal is one that is written to the audit log (1st, 10th, 100th...)."""
        return audit_at(self.refused)


def audit_at(count: int) -> bool:
    """Whether the ``count``-th refusal in a window is written to the audit log: the 1st,
    10th, 100th ... (a flood of n refusals leaves about log10(n) rows)."""
    while count % AUDIT_AT_POWERS_OF == 0:
        count //= AUDIT_AT_POWERS_OF
    return count == 1


@dataclass
class RefusalTally:
    """Counts refusals per key (who, what) within ``window``, for aggregated audit rows.

    The keys are authenticated callers and route actions, so they are few; idle ones are
    dropped when the tally grows past ``PRUNE_ABOVE`` all the same."""

    window: timedelta = timedelta(minutes=5)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _counts: dict[tuple[str, ...], tuple[datetime, int]] = field(default_factory=dict)

    def count(self, key: tuple[str, ...], now: datetime) -> int:
        """Record one refusal for ``key``; return how many it had in the window, this one
        included."""
        with self._lock:
            if len(self._counts) >= PRUNE_ABOVE:
                self._counts = {
                    k: (start, n)
                    for k, (start, n) in self._counts.items()
                    if now - start <= self.window
                }
            started, count = self._counts.get(key, (now, 0))
            if now - started > self.window:
                started, count = now, 0
            self._counts[key] = (started, count + 1)
            return count + 1


@dataclass
class _Account:
    failures: int = 0
    last_failure: datetime | None = None
    good_addresses: OrderedDict[str, None] = field(default_factory=OrderedDict)


@dataclass
class LoginLimiter:
    per_address: int = 20
    window: timedelta = timedelta(minutes=5)
    per_account: int = 5
    base_delay: timedelta = timedelta(minutes=1)
    max_delay: timedelta = timedelta(minutes=15)
    forget_after: timedelta = timedelta(hours=1)
    good_addresses_kept: int = 16
    hash_slots: int = 4
    hash_wait_s: float = 10.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _addresses: dict[str, deque[datetime]] = field(default_factory=lambda: defaultdict(deque))
    _accounts: dict[str, _Account] = field(default_factory=lambda: defaultdict(_Account))
    _refused: dict[str, tuple[datetime, int]] = field(default_factory=dict)
    _slots: threading.BoundedSemaphore = field(init=False, repr=False)
    _prune_at: int = PRUNE_ABOVE

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(self.hash_slots)

    def _recent(self, address: str, now: datetime) -> deque[datetime]:
        times = self._addresses[address]
        while times and now - times[0] > self.window:
            times.popleft()
        return times

    def _account(self, account: str, now: datetime) -> _Account:
        state = self._accounts[account]
        if state.last_failure is not None and now - state.last_failure > self.forget_after:
            state.failures, state.last_failure = 0, None
        return state

    def delay_after(self, failures: int) -> timedelta:
        """How long a check must wait after the previous failure, after ``failures`` of them."""
        if failures < self.per_account:
            return timedelta(0)
        exponent = min(failures - self.per_account, 30)
        delay: timedelta = self.base_delay * (2**exponent)
        return min(self.max_delay, delay)

    def reserve(self, account: str, address: str, now: datetime) -> Reservation | Refusal:
        """Admit one password check, counting it as a failure until :meth:`succeeded`;
        or refuse it without any check."""
        with self._lock:
            if len(self._accounts) + len(self._addresses) >= self._prune_at:
                self._prune(now)
            recent = self._recent(address, now)
            state = self._account(account, now)
            if len(recent) >= self.per_address:
                return self._refuse("address", recent[0] + self.window, address, now)
            if address not in state.good_addresses and state.last_failure is not None:
                retry_at = state.last_failure + self.delay_after(state.failures)
                if now < retry_at:
                    return self._refuse("account", retry_at, address, now)
            recent.append(now)
            state.failures += 1
            state.last_failure = now
            return Reservation(account, address, now)

    def _prune(self, now: datetime) -> None:
        for name, state in list(self._accounts.items()):
            idle = state.last_failure is None or now - state.last_failure > self.forget_after
            if idle and not state.good_addresses:
                del self._accounts[name]
        for address in list(self._addresses):
            if not self._recent(address, now):
                del self._addresses[address]
        self._refused = {
            a: (start, n) for a, (start, n) in self._refused.items() if now - start <= self.window
        }
        # Not again before the live entries have doubled: pruning stays amortized O(1).
        self._prune_at = max(PRUNE_ABOVE, 2 * (len(self._accounts) + len(self._addresses)))

    def _refuse(self, reason: str, retry_at: datetime, address: str, now: datetime) -> Refusal:
        started, count = self._refused.get(address, (now, 0))
        if now - started > self.window:
            started, count = now, 0
        self._refused[address] = (started, count + 1)
        return Refusal(reason, retry_at, count + 1)

    def succeeded(self, reservation: Reservation) -> None:
        """The password was right: forget the account's failures, give back this attempt's
        place in the address's budget, and remember the address as one the owner uses."""
        with self._lock:
            state = self._accounts[reservation.account]
            state.failures, state.last_failure = 0, None
            state.good_addresses[reservation.address] = None
            state.good_addresses.move_to_end(reservation.address)
            while len(state.good_addresses) > self.good_addresses_kept:
                state.good_addresses.popitem(last=False)
            recent = self._addresses[reservation.address]
            if reservation.at in recent:
                recent.remove(reservation.at)

    @contextmanager
    def hashing(self) -> Iterator[bool]:
        """A slot for one password check: yields True when admitted, False when every slot
        stayed busy for ``hash_wait_s`` (the caller answers "busy")."""
        admitted = self._slots.acquire(timeout=self.hash_wait_s)
        try:
            yield admitted
        finally:
            if admitted:
                self._slots.release()
