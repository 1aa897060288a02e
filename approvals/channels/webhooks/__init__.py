"""The webhook channel: events out, signed decisions in (Standard Webhooks)."""
