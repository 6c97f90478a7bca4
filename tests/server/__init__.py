"""Tests of the web process's HTTP server (``webhooks/server``)."""
