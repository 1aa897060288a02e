"""What an agent's search writes after it has read: the approval requests it calls for.

A search (retrieval.search.selectors.chunk_search, and the conversation search) only
reads, and marks each withheld source that matched the query, where its policies
disclose matches and the agent has no request to follow, `request_due`. The agent's
read paths (the search and conversation APIs, their MCP tools, conversation
enrichment) then call `withheld_requests`, which raises those requests in one service
call from the gate's decisions the search already read; the curators' playground shows
the same result and raises nothing.
"""

from __future__ import annotations

from dataclasses import replace

from approvals.selectors.gate import InjectionDecision
from approvals.services.requests import request_context, withheld_requests_raise
from catalog.models import Agent
from retrieval.search.selectors import WithheldHits


def withheld_requests(*, agent: Agent | None, withheld: list[WithheldHits], gate: dict[int, InjectionDecision],
                      what: str, text: str) -> list[WithheldHits]:
    """`withheld` with a request raised for each entry that is due, named in it (state
    pending); reviewers read `what` the agent asked for and the head of `text`. None
    (a person signed in) raises nothing."""
    due = {entry.source_pk: gate[entry.source_pk] for entry in withheld if entry.request_due}
    if agent is None or not due:
        return withheld
    raised = withheld_requests_raise(agent=agent, decisions=due, via="search", context=request_context(what, text))
    return [replace(entry, state=decision.state, reason=decision.reason, request_id=decision.request_id,
                    request_due=decision.request_due) if (decision := raised.get(entry.source_pk)) else entry
            for entry in withheld]
