"""Failed-login throttling, per account and per client address (in memory, per process)."""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass
class LoginLimiter:
    """At most ``per_account`` failures per account and ``per_address`` per address within
    ``window``; further attempts are refused until old failures age out."""

    per_account: int = 5
    per_address: int = 20
    window: timedelta = timedelta(minutes=5)
    _failures: dict[str, deque[datetime]] = field(default_factory=lambda: defaultdict(deque))

    def _recent(self, key: str, now: datetime) -> deque[datetime]:
        times = self._failures[key]
        while times and now - times[0] > self.window:
            times.popleft()
        return times

    def allowed(self, account: str, address: str, now: datetime) -> bool:
        return (
            len(self._recent(f"user:{account}", now)) < self.per_account
            and len(self._recent(f"addr:{address}", now)) < self.per_address
        )

    def failed(self, account: str, address: str, now: datetime) -> None:
        self._recent(f"user:{account}", now).append(now)
        self._recent(f"addr:{address}", now).append(now)

    def succeeded(self, account: str) -> None:
        self._failures.pop(f"user:{account}", None)
