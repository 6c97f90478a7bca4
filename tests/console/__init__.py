"""Tests of webhooks/console/: the support console, in the test client and in Chromium."""
