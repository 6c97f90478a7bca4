"""How a worker's prefetch is spread over consuming channels (``webhooks.delivery.broker``).

The broker walks a channel's unacknowledged messages from the oldest to find each ack,
so no channel holds more than ``CHANNEL_PREFETCH`` of them. The end-to-end test (acks
reach their own channel, the worker counts once) is in ``test_engine_faults``.
"""

from __future__ import annotations

from webhooks.delivery.broker import CHANNEL_PREFETCH, CHANNEL_SLOTS, consumer_channels


def test_the_default_prefetch_goes_over_six_channels_of_five_thousand() -> None:
    assert consumer_channels(30_000) == [5_000] * 6


def test_a_small_prefetch_stays_on_one_channel() -> None:
    assert consumer_channels(40) == [40]
    assert consumer_channels(CHANNEL_PREFETCH) == [CHANNEL_PREFETCH]


def test_a_prefetch_that_does_not_divide_evenly_is_shared_to_the_message() -> None:
    shares = consumer_channels(12_001)
    assert shares == [4_001, 4_000, 4_000]


def test_the_largest_prefetch_fits_twice_in_the_slots_a_delivery_tag_can_name_primary_and_bulk() -> None:
    shares = consumer_channels(65_535)
    assert 2 * len(shares) <= CHANNEL_SLOTS and max(shares) <= CHANNEL_PREFETCH and sum(shares) == 65_535
