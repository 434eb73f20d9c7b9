"""Beam's signature reading kept per function (chunkmill.pipeline.signatures): the same
answers as Beam's own, each function read once."""

from __future__ import annotations

import functools

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.transforms import core, userstate

from chunkmill.pipeline import signatures

BEAM_ANSWER = getattr(
    core.get_function_args_defaults, "__wrapped__", core.get_function_args_defaults
)


COUNT = beam.DoFn.StateParam(userstate.ReadModifyWriteStateSpec("count", VarIntCoder()))


class Counting(beam.DoFn):
    def process(self, element, count=COUNT, timestamp=beam.DoFn.TimestampParam):
        yield element


def plain(a, b=1, *rest, c=2, **more):
    return a


def counted() -> tuple[list[object], object]:
    """Beam's answer behind a counter of the functions it was asked about."""
    asked: list[object] = []

    def answer(f):
        asked.append(f)
        return BEAM_ANSWER(f)

    return asked, signatures.memoized(answer)


def test_answers_are_beams_own_for_every_kind_of_callable():
    _, memo = counted()
    dofn = Counting()
    callables = [
        dofn.process,
        dofn.setup,
        dofn.start_bundle,
        Counting.process,
        plain,
        lambda x, y=3: x,
        functools.partial(plain, 1),
        len,
        str.strip,
        int,
    ]
    for f in callables:
        assert memo(f) == BEAM_ANSWER(f)
        assert memo(f) == BEAM_ANSWER(f)  # and again, from what was kept


def test_each_function_is_read_once_bound_or_not():
    asked, memo = counted()
    first, second = Counting(), Counting()
    for _ in range(3):
        memo(first.process)
        memo(second.process)
        memo(Counting.process)
    # One read for the method bound (to either instance), one for the plain function.
    assert asked == [first.process, Counting.process]
    memo(len)
    memo(len)
    assert asked[2:] == [len, len]  # not a Python function: not kept


def test_the_lists_handed_out_are_fresh():
    _, memo = counted()
    args, defaults = memo(plain)
    args.append("x")
    defaults.clear()
    assert memo(plain) == (["a", "b"], [1])


def test_memoize_keeps_beams_answers_and_state_is_still_found():
    signatures.memoize()
    signatures.memoize()  # once per process
    assert core.get_function_args_defaults.__wrapped__ is BEAM_ANSWER
    state, timers = userstate.get_dofn_specs(Counting())
    assert [s.name for s in state] == ["count"] and timers == set()
    assert userstate.is_stateful_dofn(Counting()) and not userstate.is_stateful_dofn(beam.DoFn())
