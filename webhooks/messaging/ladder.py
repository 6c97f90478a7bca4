"""The backoff ladder: which waiting tier a failed attempt goes to, and when it is final."""

from __future__ import annotations

from dataclasses import dataclass

from webhooks.durations import parse_ms

#: Stripe-like default: about three days over ten attempts.
DEFAULT_LADDER = "5s,5m,30m,2h,5h,10h,14h,20h,24h"


@dataclass(frozen=True)
class Ladder:
    """Delays in milliseconds: the n-th failure (1-based) waits ``delays_ms[n-1]``."""

    delays_ms: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> "Ladder":
        """Parse ``"5s,5m,30m"``; rejects an empty ladder and non-positive delays."""
        parts = [part for part in (p.strip() for p in text.split(",")) if part]
        if not parts:
            raise ValueError("RETRY_LADDER must name at least one delay")
        delays = tuple(parse_ms(part) for part in parts)
        if any(delay <= 0 for delay in delays):
            raise ValueError("RETRY_LADDER delays must be positive")
        return cls(delays)

    @property
    def max_attempts(self) -> int:
        """The first attempt plus one per tier."""
        return len(self.delays_ms) + 1

    def next_delay_ms(self, failed_attempt: int) -> int | None:
        """Delay before the attempt after ``failed_attempt`` (1-based), or None when it was the last."""
        if failed_attempt < 1:
            raise ValueError("attempts are numbered from 1")
        if failed_attempt > len(self.delays_ms):
            return None
        return self.delays_ms[failed_attempt - 1]

    def longest_tier_within(self, ms: int) -> int | None:
        """The longest tier delay not over ``ms``, or None when even the shortest is longer.

        Used to make a message that came back before its ``not_before`` wait again
        without overshooting: it hops down the tiers and finishes in the defer queue.
        """
        fitting = [delay for delay in self.delays_ms if delay <= ms]
        return max(fitting) if fitting else None
