"""Tests of webhooks/health/: endpoint presence, release of parked deliveries, alerts."""
