"""Offset paging of a list page (the targets list, the audit log): where a page sits and
the links to its neighbours. Keyset paging (the runs search) is
:class:`fleetcron.web.pages.history.KeysetPager`."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode


@dataclass(frozen=True)
class OffsetPager:
    """Where a page of ``page_size`` rows from ``offset`` sits among ``total``, and the
    links to its neighbours: ``query`` (the page's filters) kept, the first page's link
    without an offset."""

    offset: int
    shown: int
    total: int
    query: dict[str, str]
    page_size: int

    def _link(self, offset: int) -> str:
        return "?" + urlencode({**self.query, **({"offset": str(offset)} if offset else {})})

    @property
    def first(self) -> int:
        return self.offset + 1 if self.shown else 0

    @property
    def last(self) -> int:
        return self.offset + self.shown

    @property
    def previous(self) -> str | None:
        return self._link(max(0, self.offset - self.page_size)) if self.offset > 0 else None

    @property
    def next(self) -> str | None:
        return self._link(self.offset + self.page_size) if self.last < self.total else None
