"""Beam's reading of function signatures, once per function.

While it builds a graph and again when it runs one, Beam asks each DoFn for its state and
timer parameters (``apache_beam.transforms.userstate.get_dofn_specs``) several times, and
each time reads the signature of every method the DoFn has, most of them ``DoFn``'s own:
about 12,000 ``inspect.signature`` calls for a run's graph, a tenth of a one-document run.
A function's parameters and their defaults do not change after it is defined, so
``memoize()`` keeps Beam's answer (``apache_beam.transforms.core.get_function_args_defaults``)
per function and per bound-or-not, and every later ask is a lookup. Answers for other
callables (partials, callable objects, builtins) are not kept.

Installed by the commands that build a pipeline, for their own process only.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from typing import Any, cast

Answer = tuple[list[str], list[Any]]


def memoized(beam_answer: Callable[[Any], Answer]) -> Callable[[Any], Answer]:
    """``beam_answer`` (``get_function_args_defaults``), kept per plain function and per
    method's function; fresh lists each time, as Beam's own gives."""
    # function -> {bound: the answer} (for the function, for a method bound to an instance)
    answers: weakref.WeakKeyDictionary[types.FunctionType, dict[bool, Answer]] = (
        weakref.WeakKeyDictionary()
    )

    def get_function_args_defaults(f: Any) -> Answer:
        bound = isinstance(f, types.MethodType)
        function = f.__func__ if bound else f
        if not isinstance(function, types.FunctionType):
            return beam_answer(f)
        kept = answers.setdefault(function, {})
        if bound not in kept:
            kept[bound] = beam_answer(f)
        args, defaults = kept[bound]
        return list(args), list(defaults)

    get_function_args_defaults.__wrapped__ = beam_answer  # type: ignore[attr-defined]
    return get_function_args_defaults


def memoize() -> None:
    """Makes Beam's ``get_function_args_defaults`` keep its answers (once per process)."""
    from apache_beam.transforms import core

    beam_answer = getattr(core, "get_function_args_defaults", None)
    # A Beam without it (another release) keeps its own reading; kept answers are kept once.
    if beam_answer is not None and not hasattr(beam_answer, "__wrapped__"):
        cast(Any, core).get_function_args_defaults = memoized(beam_answer)
