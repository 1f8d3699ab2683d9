"""The one rounding of durations that reports use (simulator report, PR impact report)."""

import math

import pytest

from engine.durations import approx_duration


@pytest.mark.parametrize("seconds, text", [
    (0, "0 s"), (45.4, "45 s"), (119, "119 s"), (120, "2.0 min"), (750, "12.5 min"),
    (7199, "120.0 min"), (7200, "2.0 h"), (3 * 86400 - 1, "72.0 h"), (3 * 86400, "3.0 d"),
])
def test_rounding_thresholds(seconds, text):
    assert approx_duration(seconds) == text


def test_missing_values_use_the_callers_mark():
    assert approx_duration(None) == "-"
    assert approx_duration(math.nan, missing="–") == "–"
