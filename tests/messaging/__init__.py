"""Tests of webhooks/messaging/: brokers, topology, messages, the publisher and the outbox."""
