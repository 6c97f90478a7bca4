"""Tests of the page kit (webhooks/pages)."""
