"""An enrichment trace told in plain words, for a person who never saw the code (pure:
no Django). The traces pages and the playground show the same story, from a stored
trace or a dry run's unsaved one.

A trace is what the pipeline recorded (retrieval.enrichment.pipeline): its steps, one
per pass with that pass's own fields, and its hints, one per reference surfaced. This
module reads them tolerantly (a trace stored before a field existed lacks it) and says:

- what became of each reference (`outcomes`): expanded, pinned, hinted, withheld (why,
  and the approval request to follow) or cut, and every pass that found it;
- what each pass did (`steps`): a title, a sentence, and the items it found;
- where each tag matched (`text_parts`): the text detection read, cut into parts, the
  parts where a tag occurs naming their tags; a template escapes every part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from catalog.tag_keys import tag_key

Step = Mapping[str, Any]

ACTIONS = {
    "expand": ("expanded", "its full instructions were added to the text"),
    "pin": ("pinned", "the file read lies in it: it was named as the reading context"),
    "hint": ("hinted", "named in the hint block, for the agent to select if it needs it"),
    "cut": ("cut", "found, but beyond the agent's limit of hints per text"),
    "none": ("not expanded", "mentioned by @id, but withheld"),
    "context": ("added as context", "a passage of it was added to the newest user message's [context: ...]"),
    "search": ("returned by search", "passages of it were returned as search hits"),
}
STATES = {
    "not_required": "needs no approval",
    "approved": "approved for this agent",
    "pending": "waits for a reviewer",
    "rejected": "rejected by a reviewer",
    "revoked": "its approval was revoked",
    "expired": "its approval expired",
    "missing": "no approval",
}
TITLES = {
    "mention": "@mentions",
    "tag": "Tags",
    "path": "File paths",
    "semantic": "Meaning",
    "link": "Links",
    "rank": "Ranking",
    "governance": "Approval gate",
    "format": "Text sent back",
    "strip": "Earlier injections",
    "memory": "Facts and memory",
    "passages": "Passages",
    "conversation": "Conversation sent back",
    "search": "Search",
}


@dataclass(frozen=True)
class Part:
    text: str
    tags: tuple[str, ...] = ()  # the tags matched here; () for plain text


@dataclass
class Outcome:
    """What became of one reference, and why."""

    ref: str
    name: str
    action: str  # expanded | pinned | hinted | cut | not expanded | withheld
    meaning: str
    found_by: list[str]
    withheld: bool = False
    reason: str = ""
    state: str = ""
    request_id: int | None = None
    request_due: bool = False  # a dry run: the agent's own call would raise a request


@dataclass
class StoryStep:
    name: str
    title: str
    summary: str
    items: list[str] = field(default_factory=list)
    ms: float | None = None


@dataclass
class Story:
    outcomes: list[Outcome]
    steps: list[StoryStep]
    text_parts: list[Part] | None  # None: the text was not kept
    stripped_chars: int = 0  # earlier injections removed before detection
    tags_placed: bool = True  # every tag's place was recorded and found again in the text
    hidden_chars: int = 0  # characters of the text past what a page shows

    @property
    def injected(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.withheld and o.action in ("expanded", "pinned", "hinted")]

    @property
    def withheld(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.withheld]


# --- the whole ------------------------------------------------------------------------------


def trace_story(*, steps: Sequence[Step], hints: Sequence[Mapping[str, Any]], text_read: str | None,
                text_received: str | None, show_chars: int = 20_000) -> Story:
    """The story of one trace. `text_read`: the text as detection read it (the text
    received with Lectern's earlier injections removed); None when no text was kept.
    Of it, the first `show_chars` characters are shown (a tool result may be long)."""
    by_pass = {step.get("pass"): step for step in steps}
    gate = {_qualified(d): d for d in by_pass.get("governance", {}).get("decisions", [])}
    outcomes = [_outcome(hint, gate.get(_qualified(hint), {})) for hint in hints]
    parts, placed, hidden = None, True, 0
    if text_read is not None:
        shown = text_read[:show_chars]
        hidden = len(text_read) - len(shown)
        at = by_pass.get("tag", {}).get("at", {})
        if hidden:  # a tag past what is shown is no misplaced tag
            at = {tag: place for tag, place in at.items()
                  if not (isinstance(place, list) and place[-1:] > [len(shown)])}
        parts, placed = tag_parts(shown, at)
    stripped = len(text_received) - len(text_read) if text_received is not None and text_read is not None else 0
    followed = any(h.get("injected") in ("expand", "pin") and not h.get("withheld") for h in hints)
    return Story(outcomes=outcomes, steps=[_step(step, followed) for step in steps], text_parts=parts,
                 stripped_chars=stripped, tags_placed=placed, hidden_chars=hidden)


def _qualified(item: Mapping[str, Any]) -> str:
    return f"{item.get('catalog', '')}/{item.get('source_id', '')}"


def _outcome(hint: Mapping[str, Any], decision: Mapping[str, Any]) -> Outcome:
    injected = hint.get("injected", "hint")
    withheld = bool(hint.get("withheld"))
    action, meaning = ACTIONS.get(injected, (injected, ""))
    if withheld and injected != "none":
        action, meaning = "withheld", "it needs an approval this caller does not have: nothing of it was sent"
    elif withheld:
        meaning = "it needs an approval this caller does not have: nothing of it was sent"
    reasons = hint.get("reasons") or [{"via": hint.get("via", ""), "matched": hint.get("matched", [])}]
    return Outcome(ref=hint.get("ref") or _qualified(hint), name=hint.get("name", ""), action=action,
                   meaning=meaning, found_by=[found_by(r.get("via", ""), r.get("matched", []), hint.get("score"))
                                              for r in reasons],
                   withheld=withheld, reason=hint.get("reason", ""), state=decision.get("state", ""),
                   request_id=hint.get("request_id"), request_due=bool(decision.get("request_due")))


def found_by(via: str, matched: list[str], score: float | None = None) -> str:
    """One pass's reason for a reference, as a phrase."""
    listed = ", ".join(matched)
    if via == "mention":
        return f"mentioned as {listed}"
    if via == "tag":
        return f"tag{'s' if len(matched) > 1 else ''} {_quoted(matched)} in the text"
    if via == "semantic":
        return f"close in meaning (similarity {score:.2f})" if score is not None else "close in meaning"
    if via == "link":
        return f"linked from {listed}" if matched else "linked from an expanded reference"
    if via == "path":
        return f"the file {listed} lies in it"
    if via == "search":
        return "matched the search"
    return f"{via} {listed}".strip()


def _quoted(items: Iterable[str]) -> str:
    return ", ".join(f"“{item}”" for item in items)


# --- where the tags are -----------------------------------------------------------------------


def tag_parts(text: str, at: Mapping[str, list[int]]) -> tuple[list[Part], bool]:
    """`text` cut at the recorded tag places; overlapping tags ("circuit breaker" and
    "breaker") share the characters they both cover. A place that does not hold its tag
    in this text (a trace from before places were kept, or a text stripped under other
    keys) is left unmarked, and the second value says so."""
    spans = []
    placed = True
    for tag, place in at.items():
        start, end = (place + [0, 0])[:2] if isinstance(place, list) else (0, 0)
        fits = 0 <= start < end <= len(text)
        if not fits or tag_key(text[start:end]) != tag_key(tag):
            placed = False
            continue
        spans.append((start, end, tag))
    cuts = sorted({0, len(text), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    parts = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        tags = tuple(sorted(tag for s, e, tag in spans if s <= start and end <= e))
        parts.append(Part(text[start:end], tags))
    return _merged(parts), placed


def _merged(parts: list[Part]) -> list[Part]:
    merged: list[Part] = []
    for part in parts:
        if merged and merged[-1].tags == part.tags:
            merged[-1] = Part(merged[-1].text + part.text, part.tags)
        else:
            merged.append(part)
    return merged


# --- each pass ----------------------------------------------------------------------------------


def _step(step: Step, followed: bool) -> StoryStep:
    """`followed`: some reference was expanded or pinned, so links were followed from it."""
    name = str(step.get("pass", ""))
    explain = _EXPLAIN.get(name)
    if name == "link":
        summary, items = _link(step, followed)
    else:
        summary, items = explain(step) if explain else (f"The pass {name!r} ran.", [])
    return StoryStep(name=name, title=TITLES.get(name, name), summary=summary, items=items, ms=step.get("ms"))


def _mention(step: Step) -> tuple[str, list[str]]:
    found = step.get("candidates", [])
    if not found:
        return "The text names no reference by @id.", []
    items = []
    for c in found:
        matched = ", ".join(c.get("matched", []))
        if c.get("injected") == "expand":
            items.append(f"{matched} names {c.get('name', '')} ({c.get('ref', '')}): its full instructions are "
                         "to be added to the text, if the approval gate allows.")
        else:
            items.append(f"{matched} could be {c.get('name', '')} ({c.get('ref', '')}): "
                         f"{c.get('reason') or 'not expanded'}.")
    return f"The text names {_count(len(found), 'reference')} by @id.", items


def _tag(step: Step) -> tuple[str, list[str]]:
    tags = step.get("tags", {})
    at = step.get("at", {})
    if not tags:
        return "No tag of the caller's references occurs in the text.", []
    items = []
    for tag, ids in tags.items():
        place = at.get(tag)
        where = f" at characters {place[0] + 1}–{place[1]}" if isinstance(place, list) and len(place) == 2 else ""
        items.append(f"“{tag}”{where}: carried by {', '.join(ids)}.")
    proposed = step.get("candidates", 0)
    return (f"Found {_count(len(tags), 'tag')} of the caller's references in the text; they proposed "
            f"{_count(proposed, 'reference')} not already selected or preselected."), items


def _path(step: Step) -> tuple[str, list[str]]:
    paths = step.get("paths", [])
    pinned = step.get("candidates", [])
    items = [f"{c.get('matched', [''])[0]} lies in {c.get('name', '')} ({c.get('ref', '')}), a reference "
             "preselected for the caller: it is pinned as the reading context." for c in pinned]
    if not paths:
        return "The text names no file path.", items
    looked = f"Looked at {_count(len(paths), 'file path')} in the text: {', '.join(paths[:5])}" + \
        ("…" if len(paths) > 5 else "") + "."
    return looked + ("" if pinned else " None lies in a reference preselected for the caller."), items


def _semantic(step: Step) -> tuple[str, list[str]]:
    if step.get("skipped"):
        return f"Skipped: {step['skipped']}.", []
    read = "its content words" if step.get("embedded_text") == "content words" else "as written"
    summary = (f"Compared the meaning of the text (read {read}, its first {step.get('embedded_tokens', '?')} model "
               f"tokens, with {step.get('model', 'the embedding model')}) with each reference's name, description "
               f"and tags. A reference qualifies at a similarity of {_number(step.get('threshold'))} or more: the "
               f"caller's floor is {_number(step.get('floor'))}, and a match must also come within "
               f"{_number(step.get('margin'))} of the best one.")
    items = [f"{ref}: {_number(score)} — qualifies." for ref, score in step.get("candidates", {}).items()]
    items += [f"{ref}: {_number(score)} — below the line." for ref, score in
              step.get("nearest_below_threshold", {}).items()]
    return summary, items


def _link(step: Step, followed: bool) -> tuple[str, list[str]]:
    graph = step.get("discovered", [])
    if not graph and not followed:
        return "No reference was expanded or pinned, so there were no links to follow.", []
    if not graph:
        return "The references expanded or pinned link to no other reference.", []
    items = []
    for node in graph:
        parents = "; ".join(f"{p.get('source_id')} by {'mention' if p.get('via') == 'mention' else 'link'} "
                            f"{p.get('evidence')}" for p in node.get("parents", []))
        hinted = " (hinted: a direct neighbour)" if node.get("depth") == 1 else ""
        items.append(f"{node.get('catalog')}/{node.get('source_id')}, {node.get('depth')} "
                     f"step{'s' if node.get('depth') != 1 else ''} away, from {parents}{hinted}.")
    return (f"Followed @mentions and markdown links from the references expanded or pinned: "
            f"reached {_count(len(graph), 'reference')}; only direct neighbours are hinted."), items


def _rank(step: Step) -> tuple[str, list[str]]:
    kept, cut = step.get("kept", []), step.get("cut", 0)
    summary = (f"The caller's limit is {step.get('max_hints', '?')} hints per text (tags first, then meaning, "
               f"then links): kept {_count(len(kept), 'reference')}")
    summary += f", cut {cut}." if cut else "."
    return summary, [f"Kept {ref}." for ref in kept]


def _governance(step: Step) -> tuple[str, list[str]]:
    decisions = step.get("decisions", [])
    if not decisions:
        return "Nothing reached the approval gate: no reference was about to be sent.", []
    items = []
    for d in decisions:
        ref = _qualified(d)
        if d.get("allowed"):
            how = "approved (request #{})".format(d["request_id"]) if d.get("state") == "approved" \
                else "needs no approval"
            items.append(f"{ref}: allowed, {how}.")
            continue
        follow = f" Request #{d['request_id']}." if d.get("request_id") else ""
        if d.get("request_due"):
            follow += " A real call by this agent would raise an approval request now; this dry run raised none."
        items.append(f"{ref}: withheld — {d.get('reason', '')}.{follow}")
    withheld = sum(1 for d in decisions if not d.get("allowed"))
    return (f"Asked the approval gate about each of the {_count(len(decisions), 'reference')} about to be sent: "
            f"{len(decisions) - withheld} allowed, {withheld} withheld."), items


def _format(step: Step) -> tuple[str, list[str]]:
    blocks = step.get("blocks", 0)
    if not blocks:
        return "Nothing to add: the text goes back as it came (earlier Lectern injections removed).", []
    return (f"Added {_count(blocks, 'block')} after the text (expansions, reading context, the hint block), "
            "signed so that the next enrichment removes them before reading."), []


# --- a conversation's passes (retrieval.conversations.injection) ---------------------------


def _strip(step: Step) -> tuple[str, list[str]]:
    restored = step.get("restored", [])
    if not restored:
        return f"Read {_count(step.get('messages', 0), 'message')}; none carried an earlier Lectern injection.", []
    summary = (f"Read {_count(step.get('messages', 0), 'message')} and removed what Lectern had added to "
               f"{len(restored)} of them, restoring each one's own text "
               f"({_count(step.get('freed_tokens', 0), 'token')} freed).")
    return summary, [f"Message {i + 1} restored." for i in restored]


def _memory(step: Step) -> tuple[str, list[str]]:
    facts, hits = step.get("facts", []), step.get("hits", [])
    summary = (f"The end user's facts: {', '.join(facts) if facts else 'none'}. Searched their memories by the "
               f"message's keywords and by meaning, each boosted by how recently it was stored: "
               f"{_count(len(hits), 'memory')} found.")
    items = [f"“{_short(hit.get('content', ''))}”: score {_number(hit.get('score'))} (keywords "
             f"{_number(hit.get('lexical'))}, meaning {_number(hit.get('similarity'))}, recency "
             f"{_number(hit.get('recency'))}) — {'relevant enough' if hit.get('kept') else 'below the threshold'}."
             for hit in hits]
    return summary, items


def _passages(step: Step) -> tuple[str, list[str]]:
    hits, withheld = step.get("hits", []), step.get("withheld", [])
    summary = (f"Searched {', '.join(step.get('catalogs', [])) or 'no catalog'} by the meaning of the message: "
               f"{_count(len(hits), 'passage')} found, {_count(len(withheld), 'reference')} withheld by the "
               f"approval gate.")
    items = [f"@{hit.get('ref')}: a passage of similarity {_number(hit.get('score'))} — "
             f"{'relevant enough' if hit.get('kept') else 'below the threshold'}." for hit in hits]
    items += [f"{w.get('ref')}: withheld — {w.get('reason', '')}."
              + (f" Request #{w['request_id']}." if w.get("request_id") else "") for w in withheld]
    return summary, items


def _conversation(step: Step) -> tuple[str, list[str]]:
    tokens = step.get("tokens", {})
    sizes = (f"{tokens.get('before', '?')} tokens came in, {tokens.get('after', '?')} went back "
             f"({tokens.get('freed', 0)} freed from earlier turns, {tokens.get('added', 0)} added).")
    at = step.get("injected_into")
    if at is None:
        return ("Nothing relevant enough to add: the messages go back as they came (earlier injections "
                "removed). " + sizes), []
    items = [f"memory: “{_short(item.get('text', ''))}” (score {_number(item.get('score'))})"
             if item.get("kind") == "memory" else
             f"a passage of @{item.get('ref')} (similarity {_number(item.get('score'))}; its text is not kept)"
             for item in step.get("context", [])]
    return (f"Added {_count(step.get('facts', 0), 'fact')} and {_count(len(items), 'item')} of context after "
            f"message {at + 1}, the newest user message, signed so that the next call removes them. " + sizes), items


def _search(step: Step) -> tuple[str, list[str]]:
    hits, withheld = step.get("hits", []), step.get("withheld", [])
    summary = (f"Searched {step.get('catalog', '?')} ({step.get('mode', '?')}): {_count(len(hits), 'passage')} "
               f"returned, {_count(len(withheld), 'reference')} withheld by the approval gate. Each passage's text "
               "is kept apart by its fingerprint, for curators resolving its cite.")
    items = [f"Result {i} from @{hit.get('ref')}" + (f", approved by request #{hit['approval_id']}."
                                                     if hit.get("approval_id") else ".")
             for i, hit in enumerate(hits, start=1)]
    items += [f"{w.get('ref')}: withheld — {w.get('reason', '')}."
              + (f" Request #{w['request_id']}." if w.get("request_id") else "") for w in withheld]
    return summary, items


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_EXPLAIN = {"mention": _mention, "tag": _tag, "path": _path, "semantic": _semantic, "rank": _rank,
            "governance": _governance, "format": _format, "strip": _strip, "memory": _memory,
            "passages": _passages, "conversation": _conversation, "search": _search}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _number(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "?"
