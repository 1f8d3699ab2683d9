"""Specification of the one duration syntax used in policies, labels and flags."""

import pytest

from engine.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("7d", 7 * 86400),
        ("8h", 8 * 3600),
        ("15m", 900),
        ("90s", 90),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("2d12h", 2.5 * 86400),
        ("1w", 7 * 86400),
        ("250ms", 0.25),
        (".5m", 30),
        (" 8h ", 8 * 3600),
        ("0", 0),
        ("0s", 0),
        ("1h0m5s", 3605),
        (0, 0),
    ],
)
def test_valid_durations_parse_to_seconds(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty duration"),
        ("   ", "empty duration"),
        ("90", "has no unit"),
        ("1.5", "has no unit"),
        (90, "has no unit"),
        ("-5m", "is negative"),
        ("8x", "unknown unit 'x'"),
        ("8 hours", "contains a space"),
        ("1h30", "'30' has no unit"),
        ("8x5", "unknown unit 'x'"),
        ("8hours", "unknown unit 'hours'"),
        ("1h1h", "repeats the unit 'h'"),
        ("30m1h", "unit 'h' after a smaller unit"),
        ("h", "cannot read duration 'h' at 'h'"),
        ("1e3s", "unknown unit 'e'"),
        (True, "must be a string"),
        (None, "must be a string"),
        ("9" * 400 + "d", "too large"),
    ],
)
def test_invalid_durations_say_why(text, reason):
    with pytest.raises(ValueError) as err:
        parse_duration(text)
    assert reason in str(err.value)


@pytest.mark.parametrize("seconds", [0, 0.25, 59, 90, 900, 3600, 5400, 8 * 3600, 7 * 86400, 93784])
def test_format_round_trips(seconds):
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)


def test_format_is_short():
    assert format_duration(7 * 86400) == "7d"
    assert format_duration(5400) == "1h30m"
    assert format_duration(90) == "1m30s"
