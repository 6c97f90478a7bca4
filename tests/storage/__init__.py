"""Tests of webhooks/storage/: the database, its tables, ids and hand-built SQL."""
