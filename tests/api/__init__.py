"""Tests of webhooks/api/: the HTTP API: what each route accepts, refuses and answers."""
