"""The one batching rule: texts handed on in batches of about N characters.

Every place that feeds many texts to a core in pieces -- training
(:func:`feed_in_batches`), piece counting and shipping texts to workers
(:mod:`tokenforge.counting`), pretokenizing (:mod:`tokenforge.data.shards`), the
metrics that encode a corpus (:mod:`tokenforge.eval.metrics`,
:mod:`tokenforge.eval.languages`), LZ78's emitted-id scan -- cuts them with
:func:`batched`: a batch closes as soon as its texts hold ``batch_chars``
characters or more, so a batch is at most one text longer than the limit, and
memory is bounded by the batch, never by the corpus.

Not handled: cutting inside a text (a text longer than ``batch_chars`` makes a
batch of its own); sizes in bytes rather than characters.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Generator, Iterable, Iterator, Protocol, TypeVar

from .surrogates import feed_around_surrogates

__all__ = ["batched", "feed_in_batches", "read_ahead"]

T = TypeVar("T")


class _Bar(Protocol):
    def update(self, n: int) -> object: ...


def batched(texts: Iterable[str], batch_chars: int) -> Iterator[list[str]]:
    """``texts`` in lists of about ``batch_chars`` characters: a list is yielded
    once its texts hold ``batch_chars`` or more, the rest at the end (no empty
    list). An item that is not a str counts no characters (the caller's own
    check refuses it with its message). The texts are read lazily: only one
    batch is held at a time."""
    batch: list[str] = []
    size = 0
    for text in texts:
        batch.append(text)
        size += len(text) if isinstance(text, str) else 0
        if size >= batch_chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def feed_in_batches(
    feed: Callable[[list[str], Any], object],
    texts: Iterable[str],
    num_threads: int | None,
    batch_chars: int,
    bar: _Bar | None = None,
    wants_more: Callable[[], bool] | None = None,
) -> None:
    """Training's use of :func:`batched`: hand ``texts`` to a core trainer or
    counter, ``feed(batch, num_threads)`` (lone surrogates as
    :func:`tokenforge.surrogates.feed_around_surrogates` does);
    ``bar.update(chars)`` after each batch; ``wants_more()`` returning False
    after a batch stops reading (a trainer that is full)."""
    for batch in batched(texts, batch_chars):
        feed_around_surrogates(feed, batch, num_threads)
        if bar is not None:
            bar.update(sum(map(len, batch)))
        if wants_more is not None and not wants_more():
            return


def read_ahead(items: Iterator[T], depth: int = 1) -> Generator[T, None, None]:
    """``items``, pulled by a thread of their own up to ``depth`` ahead of the
    caller: reading a file's next block (``read`` releases the GIL) overlaps
    counting this one in the core, where it was a serial stretch between blocks.
    An exception of ``items`` is raised here, in order; closing this iterator
    (or an exception of the caller, Ctrl-C) stops the thread and closes
    ``items`` on it. Memory: ``depth + 1`` items held at most."""
    q: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def put(item: tuple[bool, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for x in items:
                if not put((True, x)):
                    return
            put((True, end))
        except BaseException as e:  # handed to the caller, raised there
            put((False, e))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=run, name="tokenforge-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            ok, x = q.get()
            if not ok:
                raise x
            if x is end:
                return
            yield x
    finally:
        stop.set()
        thread.join()
