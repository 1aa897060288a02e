"""The playground's runs: a search or an enrichment exactly as an agent (or a person)
would get it, through the same read paths, with none of the writes that follow them.

**Decision: a playground run writes nothing in anyone's name.** A curator running a
prompt "as support-bot" must see what support-bot would get: its catalogs, its
thresholds and hint limit, its pins and recorded selections, and the approval gate's
decision for it, withheld references named with their reason and request, never their
content. But the agent did not ask: a request raised in its name would put work in the
reviewers' queue that no agent wanted, e-mail them, and show in the agent's history; a
trace stored under it would make the traces page and the agent's record say it sent a
text it never sent; a grant would let it read files it never selected. Search and
enrichment read without writing (chunk_search, enrich_preview), and only the agent's
own calls raise requests and store traces afterwards: here the gate's answer says
where its call would raise a request (`request_due`), nothing is granted, and the
trace is built and shown but not stored. The alternative, storing
traces marked as playground runs, would have kept a record of the curators' trials,
but mixed into the agents' traces (every reader of traces would have to filter them
out) and still could not raise requests honestly. What a curator tried is recomputed
from its link instead (GET with the parameters).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User

from catalog.models import Agent, Catalog
from retrieval.citations.selectors import Citation, citations_of
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.pipeline import EnrichResult, enrich_preview
from retrieval.search.highlight import Part, marked_parts, query_terms
from retrieval.search.selectors import Hit, SearchOptions, SearchResult, chunk_search
from retrieval.traces.selectors import story_of
from retrieval.traces.story import Story


@dataclass
class ShownHit:
    rank: int
    hit: Hit
    parts: list[Part]  # the chunk's text, the query's terms marked
    cited: Citation  # its cite and approval, as the agent's call would carry them


@dataclass
class SearchRun:
    result: SearchResult
    hits: list[ShownHit]
    terms: list[str]  # the query's terms, as BM25 reads them


@dataclass
class EnrichRun:
    result: EnrichResult
    story: Story


def search_run(*, catalog: Catalog, query: str, options: SearchOptions, agent: Agent | None) -> SearchRun:
    """chunk_search as `agent` (None: a person): a read, so nothing is raised (the
    withheld sources say where a request is due) and no trace is stored (its cites
    resolve while the documents hold their text); each hit's text with the query's
    terms marked, and its citation."""
    result = chunk_search(catalog=catalog, query=query, options=options, agent=agent)
    terms = query_terms(query)
    citations = citations_of(catalog=catalog, hits=result.hits, agent=agent)
    hits = [ShownHit(rank, hit, marked_parts(hit.content, terms), cited)
            for rank, (hit, cited) in enumerate(zip(result.hits, citations, strict=True), start=1)]
    return SearchRun(result=result, hits=hits, terms=sorted(terms))


def enrich_run(*, person: User, agent: Agent | None, catalog: Catalog | None, text: str,
               surface: str) -> EnrichRun:
    """enrich as `agent` (None: `person`, under the gate's rule for people) over its
    catalogs, or only `catalog`; nothing raised, granted or stored. The caller checked
    that the agent may read `catalog`."""
    caller = Caller.of(agent if agent is not None else person, [catalog.slug] if catalog is not None else None)
    result = enrich_preview(caller=caller, text=text, surface=surface)
    return EnrichRun(result=result, story=story_of(result.trace))

