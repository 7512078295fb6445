"""Start-up without the cyclic garbage collector scanning what start-up builds.

Importing the engine and assembling the first agent create some twenty thousand objects that
live as long as the process (modules, classes, functions) and hardly any cyclic garbage. The
collector ran about fifty times meanwhile, scanning the newest of them again and again: a
tenth of the time to the first request. `collector_paused` holds it off for such a stretch
and then moves what the stretch left to the oldest generation, which only the rare full
collection scans (`gc.freeze()` then `gc.unfreeze()`: no scan, no leak). Reference counting
frees everything else as usual. A process that froze objects itself (a pre-fork server) keeps
them frozen: then the collector is only resumed. Several threads may pause it at once; the
process's own setting is back when the last one is done, also when a stretch raises.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

_lock = threading.Lock()
_holders = 0
_resume = False
_stretches_run: set[str] = set()


@contextmanager
def collector_paused() -> Iterator[None]:
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


def paused_the_first_time(stretch: str) -> AbstractContextManager[None]:
    """`collector_paused()` the first time this process runs `stretch` (the run that imports
    what later runs find loaded), nothing afterwards: moving everything young to the oldest
    generation at every turn would keep the young collections from freeing short-lived
    cycles."""
    with _lock:
        if stretch in _stretches_run:
            return nullcontext()
        _stretches_run.add(stretch)
    return collector_paused()
