"""Tests of webhooks/delivery/: the delivery engine and what one attempt needs."""
