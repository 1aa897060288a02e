"""A conversation as agents send it: messages with a role and a text content, oldest
first (the chat-completions shape, text only). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ROLES = ("system", "developer", "user", "assistant", "tool")
USER = "user"


@dataclass(frozen=True)
class Message:
    role: str
    content: str


def messages_of(items: Sequence[dict[str, str]]) -> list[Message]:
    """Validated input ({role, content} each) as messages."""
    return [Message(role=item["role"], content=item["content"]) for item in items]


def conversation_markdown(messages: Sequence[Message]) -> str:
    """The conversation as markdown, a section per message with its role, paragraphs
    kept: what the storage chunker splits."""
    return "\n\n".join(f"## Message {number}\n**Role:** {message.role}\n\n{message.content.strip()}"
                       for number, message in enumerate(messages, start=1) if message.content.strip())
