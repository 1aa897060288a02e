"""The text Lectern injects: hint blocks, reference expansions,
reading context, startup instructions. Pure, but for its last section (the injection
signer: whom an injection is signed for, under keys from the settings).

What enrichment appends to a text (an injection: its blocks) ends the text with a signed
marker, `<!-- lectern S N MAC -->`: S newlines before the blocks, N characters of blocks,
and an HMAC-SHA256 (128 bits) under a server key over whom it was placed for (the
signer's scope: the agent, or person, and the end user), the text it was appended to,
the newlines and the blocks. Stripping removes an injection only where Lectern placed
it: at the end of the text it was appended to (whitespace after the marker aside), for
a scope the stripper names, byte for byte. Anything else is the user's and stays,
however much it looks like a block: a block pasted mid-text or at the end of another
text, one placed for another agent or end user, a changed one, a forged one (nobody
without the key can make a marker that verifies)."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils.crypto import salted_hmac

if TYPE_CHECKING:
    from catalog.models import Agent
    from retrieval.enrichment.caller import Caller

HINT_HEADER = "**Reference sources available** — use `selectReferences` with IDs or tags to select:"
_MARKER = re.compile(r"<!-- lectern ([0-2]) ([0-9]{1,9}) ([0-9a-f]{32}) -->")  # a text's last line

# What each conventional sub-folder of a reference holds, and what to do with it
# (`contents` annotations: directives, not just file lists).
CONTENT_KINDS = {
    "templates": "start from these files and keep their structure",
    "validation": "check your result against these before you finish",
    "policies": "rules that apply to this work; follow them",
    "scripts": "helpers to run; read each one before running it",
}


@dataclass
class HintLine:
    source_id: str  # as the agent writes it: `id`, or `catalog/id` for an agent reading several catalogs
    name: str
    matched: list[str]
    via: str
    score: float | None = None
    withheld_reason: str = ""
    note: str = ""  # for a mention hinted rather than expanded: why, and what to write


@dataclass
class ReferenceText:
    """Everything an expansion says about one reference."""

    source_id: str  # as the agent writes it (see HintLine)
    name: str
    description: str
    paths: list[str]
    contents: dict[str, list[str]] = field(default_factory=dict)  # kind -> paths
    related: list[str] = field(default_factory=list)
    base_dir: str = ""
    origin: str = ""  # a git or web source's repository and commit, or its site


def one_line(text: str) -> str:
    return " ".join(text.split())


def hint_block(hints: Iterable[HintLine]) -> str:
    lines = []
    for hint in hints:
        if hint.withheld_reason:
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} (withheld: {hint.withheld_reason})")
        elif hint.via == "mention":
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} ({hint.note})")
        elif hint.via == "tag":
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} (matched: {', '.join(hint.matched)})")
        elif hint.via == "semantic":
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} (related in meaning, score {hint.score:.2f})")
        else:
            lines.append(f"- @{hint.source_id}: {one_line(hint.name)} (linked from {', '.join(hint.matched)})")
    if not lines:
        return ""
    return "---\n" + HINT_HEADER + "\n\n" + "\n".join(lines) + "\n---"


def contents_lines(reference: ReferenceText) -> list[str]:
    lines = []
    for kind, directive in CONTENT_KINDS.items():
        paths = reference.contents.get(kind)
        if paths:
            folder = f"{reference.base_dir}{kind}/"
            count = f"{len(paths)} file" + ("s" if len(paths) != 1 else "")
            lines.append(f"- {kind} ({folder}, {count}): {directive}")
    return lines


SELECTED = "selected; its files are authorised for reading"
LISTED = "listed, not loaded: read its files when you need them"


def expansion_block(reference: ReferenceText, *, status: str = SELECTED) -> str:
    """A reference with its files: selected or expanded (`SELECTED`), or listed in the
    startup instructions (`LISTED`)."""
    lines = [f"---\n**Reference @{reference.source_id}: {one_line(reference.name)}** ({status})"]
    if reference.description:
        lines.append(one_line(reference.description))
    if reference.origin:
        lines.append(f"Read from: {reference.origin}")
    if reference.paths:
        lines.append("Files:")
        lines += [f"- {path}" for path in reference.paths]
    contents = contents_lines(reference)
    if contents:
        lines.append("Contents:")
        lines += contents
    if reference.related:
        lines.append("Related: " + ", ".join(f"@{ident}" for ident in reference.related))
    return "\n".join(lines) + "\n---"


def brief_listing(ref: str, name: str) -> str:
    """A listed reference without its files (the startup text ran out of budget)."""
    return f"**Reference @{ref}: {one_line(name)}** (listed without its files: select it to see them)"


def omitted_line(refs: list[str], *, count_only: bool) -> str:
    """Names the references the startup text had no room for."""
    if count_only:
        return f"Left out for the token budget: {len(refs)} more references (listReferences names them)."
    return "Left out for the token budget: " + ", ".join(f"@{ref}" for ref in refs) + "."


def reading_block(reference: ReferenceText, path: str) -> str:
    """Context for a root-level markdown of a preselected reference being read."""
    lines = [f"---\n**Reading reference @{reference.source_id}: {one_line(reference.name)}** ({path})"]
    contents = contents_lines(reference)
    if contents:
        lines.append("This reference also has:")
        lines += contents
    return "\n".join(lines) + "\n---"


@dataclass(frozen=True)
class InjectionSigner:
    """Whom injections are placed for, and the keys that sign them. `scopes` (the agent,
    or person, and the end user: injection_signer below): the first is whom new
    injections are signed for, all are whose injections are stripped. `keys`: the first
    signs, all recognise (the current key, then earlier ones)."""

    keys: Sequence[bytes]
    scopes: Sequence[str]


def _mac(key: bytes, scope: str, text: str, separator: str, body: str) -> str:
    lengths = " ".join(str(len(part)) for part in (scope, text, separator, body))
    message = f"lectern injection 2 {lengths}\n{scope}{text}{separator}{body}"
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()[:32]


def append_blocks(text: str, blocks: list[str], *, signer: InjectionSigner) -> str:
    """`text` as it is, then the blocks (a blank line apart from it) and their marker,
    signed for `signer.scopes[0]` and this very text. The text's own ending is kept, so
    stripping gives it back whole."""
    body = "\n\n".join(block for block in blocks if block)
    if not body:
        return text
    separator = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
    mac = _mac(signer.keys[0], signer.scopes[0], text, separator, body)
    marker = f"<!-- lectern {len(separator)} {len(body)} {mac} -->"
    return f"{text}{separator}{body}\n{marker}"


def strip_injection(text: str, *, signer: InjectionSigner) -> str:
    """The text without the injection `append_blocks` placed at its end for one of
    `signer.scopes`, or the text as it is: an injection anywhere else, or for anyone
    else, is the user's text. Whitespace after the marker (a client that ends each
    message with a line break) goes with the injection: the text it was appended to
    comes back exactly."""
    head, newline, last = text.rstrip().rpartition("\n")
    found = _MARKER.fullmatch(last) if newline else None
    if found is None:
        return text
    body_start = len(head) - int(found[2])
    start = body_start - int(found[1])
    if start < 0:
        return text
    before, separator, body = text[:start], text[start:body_start], head[body_start:]
    if separator.strip("\n") or not _verifies(signer, before, separator, body, found[3]):
        return text
    return before


def _verifies(signer: InjectionSigner, text: str, separator: str, body: str, mac: str) -> bool:
    return any(hmac.compare_digest(_mac(key, scope, text, separator, body), mac)
               for key in signer.keys for scope in signer.scopes)


# --- the injection signer -----------------------------------------------------------------
#
# Who an injection is signed for (InjectionSigner, above):
# the agent (by id) or the person signed in (by username), and the end user whose
# conversation it was placed in (enrich/conversation's `user_id`; none for enrich).
#
# Stripped for that scope and, in an end user's conversation, for the same agent's scope
# without an end user: the hint blocks enrich added to a message the agent then sends on
# in that conversation, which would otherwise pile up there turn after turn. That widens
# nothing: the MAC covers the text the block was appended to, so it is removed only from
# that very text, and only the agent's own. Never another agent's injection, nor one
# placed for another end user: a block pasted from such a conversation is the user's text.


def injection_keys() -> list[bytes]:
    """The keys injections are signed with (the first) and recognised by: derived from
    SECRET_KEY, then from each of SECRET_KEY_FALLBACKS, so that rotating the secret does
    not turn the injections in conversations under way into the user's text."""
    secrets = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    return [salted_hmac("lectern.injection", "key", secret=secret, algorithm="sha256").digest() for secret in secrets]


def injection_signer(*, agent: Agent | None, person: str = "", end_user: str = "") -> InjectionSigner:
    """The signer of injections placed for `agent` (else the person `person`) and, in a
    conversation, for its `end_user`; with an end user, it strips the agent's own
    injections without one too. The end user's id is only hashed into the marker's MAC,
    never written."""
    who = f"agent {agent.pk}" if agent is not None else f"person {person}"
    scopes = [f"{who}\nend user {end_user}"]
    if end_user:
        scopes.append(f"{who}\nend user ")  # what enrich added for the agent, in no one's conversation
    return InjectionSigner(keys=injection_keys(), scopes=scopes)


def caller_signer(caller: Caller, end_user: str = "") -> InjectionSigner:
    return injection_signer(agent=caller.agent, person=caller.name, end_user=end_user)
