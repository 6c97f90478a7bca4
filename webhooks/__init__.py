"""Webhook delivery service: durable ingest, signed delivery through a backoff ladder."""
