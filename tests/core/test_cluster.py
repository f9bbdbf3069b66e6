"""tokenforge.cluster: the runner seam gives the same results here and on a Dask cluster."""

from __future__ import annotations

import operator

import pytest

from tokenforge import cluster
from tokenforge.cluster import LocalRunner, runner, task_threads
from tokenforge.errors import TokenforgeError


def square(x: int, k: int) -> int:
    return x * x * k


def add(*xs: int) -> int:
    return sum(xs)


def fail_on(x: int, bad: int) -> int:
    if x == bad:
        raise TokenforgeError(f"item {x} is bad")
    return x


@pytest.mark.parametrize("split_every", [2, 3, 8])
def test_local_and_dask_runners_agree(dask_client, split_every):
    items = list(range(37))
    want = sum(x * x * 3 for x in items)
    here = LocalRunner(progress=False)
    assert here.reduce(add, here.map(square, items, 3), split_every) == want
    assert here.map_reduce(square, items, 3, merge=add, split_every=split_every) == want
    there = runner(dask_client, progress=False)
    assert there.gather(there.reduce(add, there.map(square, items, 3), split_every)) == want
    assert there.gather(there.map_reduce(square, items, 3, merge=add, split_every=split_every)) == want
    assert there.gather(there.map_reduce(square, [5], 2, merge=add)) == 50  # one item: no merge at all
    assert there.threads == 2 and there.workers == 2 and here.threads == 1
    assert task_threads(there, None) == 1  # Dask runs one task per worker thread


def test_task_errors_reach_the_caller_as_themselves(dask_client):
    there = runner(dask_client, progress=False)
    with pytest.raises(TokenforgeError, match="item 7 is bad"):
        there.map(fail_on, list(range(10)), 7)
    with pytest.raises(TokenforgeError, match="item 3 is bad"):
        there.map_reduce(fail_on, list(range(10)), 3, merge=add)


def test_arguments_are_checked():
    here = LocalRunner(progress=False)
    with pytest.raises(ValueError, match="split_every"):
        here.reduce(add, [1, 2], 1)
    with pytest.raises(ValueError, match="nothing"):
        here.reduce(add, [])
    with pytest.raises(TypeError, match="client must be"):
        runner(3.5)
    assert runner(here) is here
    assert task_threads(here, None) is None and task_threads(here, 3) == 3
    assert operator.eq(cluster.DEFAULT_SPLIT_EVERY, 8)
