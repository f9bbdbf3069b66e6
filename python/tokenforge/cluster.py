"""Corpus-sized work on a Dask cluster, or in this process: one small seam.

Training and pretokenizing split a corpus into partitions
(:mod:`tokenforge.data.partition`), run one task per partition, and combine
the results (counts are merged in a tree, ``split_every`` at a time, or,
under a memory budget, handed to the client one at a time, :meth:`map_each`). The
engine is Dask's ``distributed``: :func:`runner` returns a :class:`DaskRunner`
for a ``distributed.Client`` or a scheduler address, and a
:class:`LocalRunner` (same calls, run here, in order) for ``None``, so every
distributed code path also runs, and is tested, without a cluster.

A *handle* is what :meth:`map`/:meth:`reduce`/:meth:`submit` return: a Dask
future (the result stays on the worker that made it, and later tasks that
take it run there) or, locally, the value itself. :meth:`gather` brings
results to the caller. Dask does the scheduling, data locality, retries of a
dead worker's tasks and the transport; nothing here re-implements any of it.

``distributed`` is imported only when a client is given (the ``dask`` extra:
``pip install 'tokenforge[dask]'``); ``import tokenforge`` never imports it.

Not handled: choosing or starting a cluster (give a client or an address of
one you run), authentication and TLS settings (configure them on the
``Client`` you pass), and per-task resource limits.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, Union

from .errors import TokenforgeError
from .progress import Progress, progress_bar

__all__ = ["runner", "LocalRunner", "DaskRunner", "DEFAULT_SPLIT_EVERY", "import_distributed", "task_threads"]

#: how many results one merge task combines in a tree reduction
DEFAULT_SPLIT_EVERY = 8

_EXTRA_HINT = "pip install 'tokenforge[dask]'"


def import_distributed() -> Any:
    """The ``distributed`` module, or a TokenforgeError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise TokenforgeError(f"running on a Dask cluster needs the distributed package: {_EXTRA_HINT}") from None
    return distributed


def runner(client: Any = None, *, progress: bool | None = None) -> LocalRunner | DaskRunner:
    """The runner for ``client``: None runs here (:class:`LocalRunner`); a
    ``distributed.Client``, or a scheduler address such as ``"tcp://host:8786"``
    (connected now, closed by :meth:`DaskRunner.close`), runs on that cluster."""
    if client is None:
        return LocalRunner(progress=progress)
    if isinstance(client, LocalRunner | DaskRunner):
        return client
    distributed = import_distributed()
    if isinstance(client, distributed.Client):
        return DaskRunner(client, owned=False, progress=progress)
    if isinstance(client, str):
        try:
            c = distributed.Client(client, timeout="30s")
        except (OSError, TimeoutError) as e:
            raise TokenforgeError(f"cannot reach the Dask scheduler at {client!r}: {e}") from None
        return DaskRunner(c, owned=True, progress=progress)
    raise TypeError(
        f"client must be a distributed.Client, a scheduler address (str) or None, not {type(client).__name__}"
    )


def task_threads(run: LocalRunner | DaskRunner, num_threads: int | None) -> int | None:
    """The one thread rule for a cluster task (counting, pretokenizing, LZ78's
    and mixedgram's passes): ``num_threads`` when given; else all cores here (a
    :class:`LocalRunner`, one task at a time) and one on a cluster.

    Why one: in Dask's model a worker thread is a core (``threads_per_worker``
    is how a cluster is given cores), and a worker cannot see the other workers
    on its machine: two workers of one thread on 2 cores, each encoding with
    every core, ran 4 encoding threads on 2 cores (1.92 s instead of 1.73 s for
    125 MB, bench/dask.py)."""
    if num_threads is not None:
        return num_threads
    return None if isinstance(run, LocalRunner) else 1


class LocalRunner:
    """The runner's calls, computed here, in order (no cluster)."""

    def __init__(self, progress: bool | None = None) -> None:
        self.progress = progress
        self.bytes_shipped = 0

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    @property
    def workers(self) -> int:
        return 1

    @property
    def threads(self) -> int:
        """Task threads (tasks that run at once): one here."""
        return 1

    def scatter(self, obj: Any) -> Any:
        return obj

    def submit(self, fn: Callable, *args: Any) -> Any:
        return fn(*args)

    def map(
        self,
        fn: Callable,
        items: Sequence,
        *args: Any,
        desc: str = "",
        weights: Sequence[int] | None = None,
        unit: str = "B",
    ) -> list:
        """``[fn(item, *args) for item in items]``, with a progress bar over ``weights``."""
        out: list = []
        self.map_each(fn, items, *args, consume=out.append, desc=desc, weights=weights, unit=unit)
        return out

    def map_each(
        self,
        fn: Callable,
        items: Sequence,
        *args: Any,
        consume: Callable[[Any], None],
        desc: str = "",
        weights: Sequence[int] | None = None,
        unit: str = "B",
    ) -> None:
        """``consume(fn(item, *args))`` for every item, in order, with a progress bar over ``weights``."""
        with _bar(self.progress, weights, len(items), desc, unit) as bar:
            for k, item in enumerate(items):
                consume(fn(item, *args))
                bar.update(weights[k] if weights is not None else 1)

    def reduce(self, merge: Callable, handles: Sequence, split_every: int = DEFAULT_SPLIT_EVERY) -> Any:
        """The tree reduction of ``handles`` with ``merge(*group)``; the same
        tree (and so the same result) as :meth:`DaskRunner.reduce`."""
        return _tree(merge, list(handles), split_every, lambda f, group: f(*group))

    def map_reduce(
        self,
        fn: Callable,
        items: Sequence,
        *args: Any,
        merge: Callable,
        split_every: int = DEFAULT_SPLIT_EVERY,
        desc: str = "",
        weights: Sequence[int] | None = None,
        unit: str = "B",
    ) -> Any:
        """``merge`` over ``fn(item, *args)`` of every item (``merge`` must be
        associative and commutative: sums); here, :meth:`map` then :meth:`reduce`."""
        return self.reduce(merge, self.map(fn, items, *args, desc=desc, weights=weights, unit=unit), split_every)

    def gather(self, handles: Any) -> Any:
        return handles


class DaskRunner:
    """The runner's calls as tasks on a Dask cluster (``distributed.Client``)."""

    def __init__(self, client: Any, *, owned: bool = False, progress: bool | None = None) -> None:
        self.client, self.owned, self.progress = client, owned, progress
        self.bytes_shipped = 0

    def __enter__(self) -> DaskRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.owned:
            self.client.close()

    @property
    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    @property
    def threads(self) -> int:
        """Task threads over the workers connected now (at least 1)."""
        return max(1, sum(int(n) for n in self.client.nthreads().values()))

    def scatter(self, obj: Any) -> Any:
        """``obj`` sent once to every worker; tasks given the handle find it there."""
        return self.client.scatter(obj, broadcast=True, hash=False)

    def submit(self, fn: Callable, *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def map(
        self,
        fn: Callable,
        items: Sequence,
        *args: Any,
        desc: str = "",
        weights: Sequence[int] | None = None,
        unit: str = "B",
    ) -> list:
        """One task ``fn(item, *args)`` per item; waits for all of them with a
        progress bar over ``weights`` and returns their futures (in order).
        The first task error is raised here; Ctrl-C cancels what is left."""
        distributed = import_distributed()
        futures = [self.client.submit(fn, item, *args, pure=False) for item in items]
        weight = {f.key: (weights[k] if weights is not None else 1) for k, f in enumerate(futures)}
        try:
            with _bar(self.progress, weights, len(futures), desc, unit) as bar:
                for f in distributed.as_completed(futures):
                    if f.status == "error":
                        f.result()  # raises the task's exception, with its traceback
                    bar.update(weight[f.key])
        except BaseException:
            self.client.cancel(futures)
            raise
        return futures

    def map_each(
        self,
        fn: Callable,
        items: Sequence,
        *args: Any,
        consume: Callable[[Any], None],
        desc: str = "",
        weights: Sequence[int] | None = None,
        unit: str = "B",
    ) -> None:
        """One task ``fn(item, *args)`` per item; ``consume`` is called here with
        each result as its task finishes (in the order they finish), one result
        at a time, and the worker's copy is released once consumed: the client
        holds one result at a time beside what ``consume`` keeps. Progress,
        errors and Ctrl-C as :meth:`map`."""
        live, weight, done = self._submit_all(fn, items, args, weights)
        try:
            with _bar(self.progress, weights, len(live), desc, unit) as bar:
                for f in done:
                    consume(f.result())  # a failed task raises its exception here, with its traceback
                    live.discard(f)
                    f.release()
                    bar.update(weight[f.key])
        except BaseException:
            self.client.cancel(list(live))
            raise

    def reduce(self, merge: Callable, handles: Sequence, split_every: int = DEFAULT_SPLIT_EVERY) -> Any:
        """A tree of ``merge(*group)`` tasks over ``handles`` (``split_every`` per
        group); returns the future of the root."""
        return _tree(merge, list(handles), split_every, lambda f, group: self.client.submit(f, *group, pure=False))

    def map_reduce(
        self,
        fn: Callable,
        items: Sequence,
        *args: Any,
        merge: Callable,
        split_every: int = DEFAULT_SPLIT_EVERY,
        desc: str = "",
        weights: Sequence[int] | None = None,
        unit: str = "B",
    ) -> Any:
        """The future of ``merge`` over ``fn(item, *args)`` of every item, merged
        as results arrive: each ``split_every`` finished results (or merges) become
        one merge task at once, so the merging overlaps the mapping and only a
        short tail is left when the last item is done. ``merge`` must be
        associative and commutative (sums: counts), so the grouping, which
        follows the order tasks finish in, does not change the result. Progress,
        errors and Ctrl-C as :meth:`map`."""
        _check_reduce(split_every, len(items))
        # the futures not yet handed to a merge: what Ctrl-C cancels (a result given to a
        # merge is released by Dask once the merge has it, so memory follows the tree)
        live, weight, done = self._submit_all(fn, items, args, weights)
        try:
            with _bar(self.progress, weights, len(live), desc, unit) as bar:
                ready: list = []
                pending = len(live)  # results (maps or merges) not yet finished
                for f in done:
                    if f.status == "error":
                        f.result()  # raises the task's exception, with its traceback
                    pending -= 1
                    if f.key in weight:
                        bar.update(weight[f.key])
                    ready.append(f)
                    if len(ready) == split_every or (pending == 0 and len(ready) > 1):
                        merged = self.client.submit(merge, *ready, pure=False)
                        live.difference_update(ready)
                        live.add(merged)
                        ready = []
                        pending += 1
                        done.add(merged)
                return ready[0]
        except BaseException:
            self.client.cancel(list(live))
            raise

    def _submit_all(
        self, fn: Callable, items: Sequence, args: tuple, weights: Sequence[int] | None
    ) -> tuple[set, dict, Any]:
        """One task per item: (the live futures, each one's weight by key, an
        ``as_completed`` over them that more futures can be added to)."""
        distributed = import_distributed()
        futures = [self.client.submit(fn, item, *args, pure=False) for item in items]
        weight = {f.key: (weights[k] if weights is not None else 1) for k, f in enumerate(futures)}
        return set(futures), weight, distributed.as_completed(futures)

    def gather(self, handles: Any) -> Any:
        return self.client.gather(handles)


def _check_reduce(split_every: int, n: int) -> None:
    """The arguments of every reduction: groups of at least 2, something to reduce."""
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, not {split_every!r}")
    if not n:
        raise ValueError("nothing to reduce")


def _bar(progress: bool | None, weights: Sequence[int] | None, n: int, desc: str, unit: str) -> Progress:
    """The progress bar of a map over ``n`` items: over ``weights`` (in ``unit``), else over the items."""
    total = sum(weights) if weights is not None else n
    return progress_bar(
        total=total, desc=desc, unit=unit if weights is not None else "parts", enabled=progress is not False
    )


def _tree(merge: Callable, level: list, split_every: int, call: Callable) -> Any:
    _check_reduce(split_every, len(level))
    while len(level) > 1:
        level = [call(merge, level[i : i + split_every]) for i in range(0, len(level), split_every)]
    return level[0]


#: what :func:`runner` returns: the same methods on this machine or on a dask cluster
Runner = Union[LocalRunner, DaskRunner]
