"""Tests of webhooks/ingest/: accepting events: the transaction, API keys, idempotency."""
