"""Conversations (issue 14): a whole conversation enriched with facts, memory and
context on its newest user message (seed 001), and retrieved from per topic (seed 002)."""
