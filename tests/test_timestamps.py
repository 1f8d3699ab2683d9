"""Epoch times in text for people: RFC 3339 in UTC; a simulator's seconds stay as they are."""

from __future__ import annotations

import time

import pytest

from engine.timestamps import readable_times


def test_an_epoch_time_reads_as_rfc3339_in_utc():
    assert readable_times("its min runtime ended at t=1796469421") == \
        "its min runtime ended at 2026-12-05T11:17:01Z"
    # a fraction of a second goes with it, not left dangling after the date
    assert readable_times("protected until t=1796469421.75; then preemptible") == \
        "protected until 2026-12-05T11:17:01Z; then preemptible"


def test_a_simulators_seconds_are_left_as_they_are():
    for text in ("at t=57600 (in 16h)", "at t=999999999", "at t=0.5"):
        assert readable_times(text) == text
    assert readable_times(None) is None and readable_times("") == ""


def test_the_time_is_utc_whatever_the_local_zone(monkeypatch):
    if not hasattr(time, "tzset"):
        pytest.skip("no tzset on this platform")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert readable_times("t=1796469421") == "2026-12-05T11:17:01Z"
    finally:
        monkeypatch.undo()
        time.tzset()
