"""Specification of what an attempt keeps of a receiver's response headers (``kept_headers``)."""

from __future__ import annotations

from webhooks.delivery.http_result import MAX_KEPT_HEADERS, kept_headers


def test_headers_are_lower_cased_and_repeats_joined_in_order() -> None:
    assert kept_headers([("X-Trace", "a"), ("Content-Type", "text/plain"), ("x-trace", "b")]) == {
        "x-trace": "a, b", "content-type": "text/plain",
    }


def test_the_header_crossing_the_budget_is_cut_there_and_the_rest_dropped() -> None:
    kept = kept_headers([("a", "1234"), ("b", "5678"), ("c", "9")], budget=8)
    assert kept == {"a": "1234", "b": "56"}


def test_a_repeat_crossing_the_budget_is_cut_after_its_separator() -> None:
    assert kept_headers([("a", "12"), ("a", "3456")], budget=7) == {"a": "12, 34"}


def test_the_default_budget_is_8_kb_of_names_and_values() -> None:
    kept = kept_headers((f"h{n}", "x" * 1000) for n in range(100))
    assert MAX_KEPT_HEADERS == 8 * 1024
    assert sum(len(name) + len(value) for name, value in kept.items()) <= MAX_KEPT_HEADERS
    assert len(kept) == 9  # eight whole headers (8,016 characters), the ninth cut
