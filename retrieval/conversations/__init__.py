"""Conversations: a whole conversation enriched with facts, memory and
context on its newest user message, and retrieved from per topic."""
