"""Progress of long work, with a rate and an ETA: a tqdm bar on a terminal, INFO lines in the log.

A stage's main loop wraps its work in :class:`Progress`; every ``interval_s`` seconds (the
``BURNQED_PROGRESS_INTERVAL_S`` environment variable, default :data:`DEFAULT_INTERVAL_S`) it logs
one line through the stage's own logger — so it lands in the rule's ``log:`` file — and, when
stderr is a terminal, it also drives a tqdm bar (quiet otherwise: a rule log has no use for
carriage returns).  The last line is logged when the block ends.  Progress never touches the work's
numbers (no RNG, no reordering): a stage with and without it produces the same bytes.

Example::

    log = logging.getLogger("burnqed.search.stage")
    with Progress(log, "search", total=400, unit="theorems") as progress:
        for theorem in theorems:
            ...
            progress.update(1)
    # the log then carries, every 30 s and at the end, lines like
    # progress search: 120/400 theorems (30.0%), 2.1/s, ETA 2m13s, elapsed 57s
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_INTERVAL_S = 30.0
INTERVAL_ENV = "BURNQED_PROGRESS_INTERVAL_S"


def interval_from_env() -> float:
    """Seconds between progress lines: ``$BURNQED_PROGRESS_INTERVAL_S`` or the default (30 s)."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{INTERVAL_ENV}={raw!r}: expected seconds (a number >= 0)") from None
    if value < 0:
        raise ValueError(f"{INTERVAL_ENV}={raw!r}: expected seconds (a number >= 0)")
    return value


def format_duration(seconds: float) -> str:
    """``45s``, ``2m13s``, ``1h02m``, ``3d04h``; ``?`` when unknown (no rate yet)."""
    if seconds != seconds or seconds in (float("inf"), float("-inf")) or seconds < 0:
        return "?"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def format_rate(per_s: float) -> str:
    """Items per second with two significant figures or more: ``120``, ``12.5``, ``2.1``, ``0.35``."""
    if per_s >= 100:
        return f"{per_s:.0f}"
    if per_s >= 1:
        return f"{per_s:.1f}"
    return f"{per_s:.2g}"


class Progress:
    """Count work done against ``total``; log ``progress NAME: d/t UNIT (p%), r/s, ETA …`` every
    ``interval_s`` seconds and at the end; drive a tqdm bar when stderr is a terminal.

    The rate counts only what this run did (``initial``, e.g. steps restored from a checkpoint or
    attempts kept by a resume, is progress but not speed).  ``clock`` is for tests.
    """

    def __init__(
        self,
        logger: logging.Logger,
        name: str,
        *,
        total: int | None,
        unit: str = "items",
        initial: int = 0,
        interval_s: float | None = None,
        bar: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger, self.name, self.total, self.unit = logger, name, total, unit
        self.initial = self.done = initial
        self.interval_s = interval_from_env() if interval_s is None else interval_s
        self.clock = clock
        self.started = self.last_logged = clock()
        self.postfix: dict[str, Any] = {}
        self._closed = False
        self._bar = None
        if bar is None:
            bar = sys.stderr.isatty()
        if bar:
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=initial, desc=name, unit=unit.rstrip("s") or unit)

    # -- counting ----------------------------------------------------------------------------

    def update(self, n: int = 1) -> None:
        """``n`` more done."""
        self.set(self.done + n)

    def set(self, done: int) -> None:
        """``done`` in all (a trainer's global step)."""
        if self._bar is not None and done != self.done:
            self._bar.update(done - self.done)
        self.done = done
        now = self.clock()
        if now - self.last_logged >= self.interval_s:
            self.log(now)

    def set_postfix(self, **values: Any) -> None:
        """Figures shown after the ETA (``loss=0.41``), on the bar and in the next lines."""
        self.postfix.update(values)
        if self._bar is not None:
            self._bar.set_postfix(**{k: str(v) for k, v in values.items()})

    def iter(self, items: Iterable[T]) -> Iterator[T]:
        """Yield ``items``, counting each one after the loop body has run."""
        for item in items:
            yield item
            self.update(1)

    # -- reporting ---------------------------------------------------------------------------

    @property
    def rate(self) -> float:
        """Items per second done by this run so far (0 before the first)."""
        elapsed = self.clock() - self.started
        return (self.done - self.initial) / elapsed if elapsed > 0 else 0.0

    def line(self, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        elapsed = now - self.started
        rate = (self.done - self.initial) / elapsed if elapsed > 0 else 0.0
        if self.total:
            head = f"{self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.1f}%)"
        else:
            head = f"{self.done} {self.unit}"
        parts = [head, f"{format_rate(rate)}/s"]
        if self.total:
            left = max(self.total - self.done, 0)
            parts.append(f"ETA {format_duration(left / rate) if rate > 0 else '?'}")
        parts.append(f"elapsed {format_duration(elapsed)}")
        parts += [f"{k} {v}" for k, v in self.postfix.items()]
        return f"progress {self.name}: " + ", ".join(parts)

    def log(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self.last_logged = now
        self.logger.info("%s", self.line(now))

    def close(self) -> None:
        """Log the final line (once) and close the bar."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        self.log()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "DEFAULT_INTERVAL_S",
    "INTERVAL_ENV",
    "Progress",
    "format_duration",
    "format_rate",
    "interval_from_env",
]
