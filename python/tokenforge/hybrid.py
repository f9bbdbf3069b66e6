"""One descriptor for methods that work on the class and on an instance.

Seed 003 trains in place (``BPETokenizer().train(...)``) while tokenforge's API
trains from the class (``BPETokenizer.train(corpus, vocab_size)`` returns a new
tokenizer); mixedgram's seed does the same. A function decorated with
:class:`class_or_instance` is called as ``func(cls, obj, *args, **kwargs)``:
``obj`` is None when it was looked up on the class.

What the lookup returns is a plain function (``functools.wraps`` of the
original, with the signature minus ``cls`` and ``obj``), so ``help()``,
``inspect.signature`` and IDEs show the method's own parameters and docstring.

Not handled: static type checkers see the descriptor, not the bound
signature (the stubs of the families do not restate it).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

__all__ = ["class_or_instance"]


class class_or_instance:  # noqa: N801  (a decorator, named like classmethod)
    """``@class_or_instance``: the method gets ``(cls, obj_or_None, ...)``."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__wrapped__ = func
        params = list(inspect.signature(func).parameters.values())[2:]
        self._signature = inspect.signature(func).replace(parameters=params)

    def __get__(self, obj: object, cls: type | None = None) -> Any:  # the bound function
        func = self.func

        def bound(*args: Any, **kwargs: Any) -> Any:
            return func(cls, obj, *args, **kwargs)

        out: Any = functools.wraps(func)(bound)
        out.__signature__ = self._signature  # what help() and inspect show
        return out
