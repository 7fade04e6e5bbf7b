"""The heap of a long-running process, settled once it has started.

Python's cyclic garbage collector walks every object of its oldest generation on a full
collection, and the allocations of a few dozen requests or ticks trigger one. A serving
process holds a few hundred thousand objects that live as long as it does (modules,
classes, SQLAlchemy's mappers and cached statements, Jinja's templates, pydantic's
validators), so each full collection walked them all again: an 80-100 ms pause inside
whichever request or tick triggered it, the slowest of a page's requests
(docs/benchmarks.md, "Pages at fleet scale"). :func:`settle` collects the start-up's garbage
once, then moves everything left to the permanent generation (:func:`gc.freeze`), so that
later collections walk only what was allocated since. Nothing frozen is ever freed, which
costs nothing for objects that live as long as the process.

It also makes the youngest generation hold :data:`YOUNG_THRESHOLD` allocations instead of
700. The objects of a run in flight (its task, request, buffers, the SSH channel) live a
second or more, so at 700 they survived young collections, were promoted and triggered full
collections, each walking every pooled connection: 0.6 ms of CPU per dispatch at 5,000
pooled SSH targets, a third of the scheduler's (docs/benchmarks.md, "CPU per dispatch
after the bulk writes"). At 20,000 most of them are freed by their reference counts before
a collection sees them; a young collection then takes a few milliseconds at most.
"""

from __future__ import annotations

import gc
from typing import Final

#: Allocations (less deallocations) of container objects between two young collections.
YOUNG_THRESHOLD: Final = 20_000


def settle() -> None:
    """Collect the start-up's garbage and exempt what is left from later collections, and
    collect young objects less often: call once, when the process has built what it serves
    with."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
