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
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect the start-up's garbage and exempt what is left from later collections:
    call once, when the process has built what it serves with."""
    gc.collect()
    gc.freeze()
