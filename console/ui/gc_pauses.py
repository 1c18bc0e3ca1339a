"""Keep the garbage collector's full passes short while the console runs.

Under a journal flood the app allocates hundreds of thousands of short-lived objects a second (journal
entries, lines, Textual strips with their per-strip caches). Some live past a young collection and
reach the oldest generation, whose full passes walk every tracked object: with the app's own ~100k
objects (widgets, styles, imported modules) those passes took 40-110 ms on a busy 2-core machine,
which is what a key waited for in the worst case (bench/tui.py). Freezing what exists once the first
screen is up moves those objects out of the collector's walk; it still frees them by reference count.
"""

from __future__ import annotations

import gc


class GcPauses:
    """Freeze the startup objects, collect young objects less often; undo both on `restore`."""

    #: Young-generation threshold while the app runs (CPython's default is 700): fewer young passes,
    #: so fewer objects that live for a frame or two get promoted towards the full passes.
    YOUNG_THRESHOLD = 10_000

    def __init__(self) -> None:
        self._thresholds: tuple[int, int, int] | None = None
        self._restored = False

    def freeze_startup(self) -> None:
        """Collect once, then freeze every object that exists now (call when the first screen is up).
        After `restore` it does nothing: a freeze timer that fires while the app is ending must not
        leave the process frozen."""
        if self._restored:
            return
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            _, older, oldest = self._thresholds
            gc.set_threshold(max(self.YOUNG_THRESHOLD, self._thresholds[0]), older, oldest)
        gc.collect()
        gc.freeze()

    def restore(self) -> None:
        """Unfreeze (so an app that ends in a longer-lived process can be collected) and reset thresholds."""
        self._restored = True
        if self._thresholds is not None:
            gc.unfreeze()
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
