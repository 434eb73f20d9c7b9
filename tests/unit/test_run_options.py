"""RunOptions: Beam's options of a run, each view made once and sharing the options' values."""

from __future__ import annotations

import pickle

from apache_beam.options.pipeline_options import StandardOptions, TypeOptions

from chunkmill.pipeline.graph import RunOptions


def test_a_view_is_made_once_and_sees_the_options_values() -> None:
    options = RunOptions(["--no_pipeline_type_check"])
    view = options.view_as(TypeOptions)
    assert options.view_as(TypeOptions) is view
    assert view.pipeline_type_check is False
    options.view_as(StandardOptions).streaming = True
    assert options.view_as(StandardOptions).streaming is True
    assert options.get_all_options()["streaming"] is True


def test_a_view_made_before_the_values_were_replaced_is_made_again() -> None:
    options = RunOptions([])
    before = options.view_as(StandardOptions)
    options._all_options = {**options._all_options, "streaming": True}
    after = options.view_as(StandardOptions)
    assert after is not before
    assert after.streaming is True


def test_pickled_options_carry_their_values_not_their_views() -> None:
    options = RunOptions(["--runner=FnApiRunner"])
    options.view_as(StandardOptions)
    assert "_views" not in options.__getstate__()
    copy = pickle.loads(pickle.dumps(options))
    assert copy.view_as(StandardOptions).runner == "FnApiRunner"
