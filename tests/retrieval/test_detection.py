"""The detection table: every pass of enrichment over the shipped demo catalog.

Each case gives a text (a prompt or a tool result) and what each pass must find.
`tags`, `mentions`, `pinned` and `withheld` are exact; `semantic` lists references
that must be among the semantic hints (similarities are a model's, not ours);
`nothing` means no pass may surface anything at all.

Demo references hinted by detection are the selectable ones: circuit-breaker,
retry-backoff, rate-limiting, sql-migrations, api-versioning, testing-strategy,
caching; secrets-management and incident-response need approval (withheld);
python-style and code-review are auto, logging-policy and service-template
preselected (never hinted: the agent already has them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from catalog.demo_loader import DEMO_DIR
from catalog.models import Agent
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.pipeline import enrich
from tests.factories import agent_with_token


@dataclass
class Case:
    id: str
    text: str
    surface: str = "prompt"
    tags: set[str] | None = None
    semantic: set[str] = field(default_factory=set)
    mentions: set[str] | None = None
    pinned: str | None = None
    context: bool | None = None
    withheld: set[str] | None = None
    links: set[str] = field(default_factory=set)
    paths: list[str] = field(default_factory=list)
    nothing: bool = False


CASES = [
    # --- separators and case -------------------------------------------------------------
    Case("space", "Our circuit breaker opens too often.", tags={"circuit-breaker"}),
    Case("hyphen", "Tune the circuit-breaker thresholds.", tags={"circuit-breaker"}),
    Case("underscore", "the circuit_breaker config", tags={"circuit-breaker"}),
    Case("title-case", "Circuit Breaker states", tags={"circuit-breaker"}),
    Case("upper-case", "CIRCUIT-BREAKER OPEN", tags={"circuit-breaker"}),
    Case("line-wrap", "we added a circuit\nbreaker to the client", tags={"circuit-breaker"}),
    Case("tag-hyphen-text-space", "we hit the rate limit again", tags={"rate-limiting"}),
    Case("tag-hyphen-text-underscore", "RATE_LIMIT=100 per minute", tags={"rate-limiting"}),
    Case("mixed-case-hyphen", "Rate-Limit exceeded for tenant 7", tags={"rate-limiting"}),
    Case("two-word-tag-hyphen", "is this fault-tolerance enough?", tags={"circuit-breaker"}),
    Case("two-word-tag-underscore", "add fault_injection tests", tags={"testing-strategy"}),
    Case("double-separator-refused", "circuit__breaker", tags=set()),
    # --- who gets hinted ----------------------------------------------------------------
    Case("auto-source-not-hinted", "follow the code style", tags=set()),
    Case("preselected-not-hinted", "add logging to the worker", tags=set()),
    Case("shared-tag-hints-all-carriers", "make it **resilience** first",
         tags={"circuit-breaker", "retry-backoff", "rate-limiting"}),
    Case("several-tags-one-source", "retries with backoff", tags={"retry-backoff"}),
    Case("approval-needed-withheld", "rotate the credentials", tags={"secrets-management"},
         withheld={"secrets-management"}),
    Case("approval-needed-security", "a security question", tags={"secrets-management"},
         withheld={"secrets-management"}),
    Case("approval-needed-incidents", "incidents happen at night", tags={"incident-response"},
         withheld={"incident-response"}),
    Case("approval-needed-on-call", "who is on call tonight?", tags={"incident-response"},
         withheld={"incident-response"}),
    # --- boundary guards ----------------------------------------------------------------
    Case("dotted-name", "call api.client.get() with a timeout", tags=set()),
    Case("dotted-java", "java.util.List and java.util.Map", nothing=True),
    Case("unix-path", "see /usr/lib/redis/redis.conf", tags=set()),
    Case("path-segment", "edit src/caching/lru.py", tags=set()),
    Case("file-name", "open caching.py", tags=set()),
    Case("identifier-underscore", "my_circuit_breaker_v2 = None", tags=set()),
    Case("identifier-hyphen-suffix", "deploy circuit-breaker-v2", tags=set()),
    Case("identifier-hyphen-prefix", "the pre-caching step", tags=set()),
    Case("identifier-hyphen-after", "a caching-layer module", tags=set()),
    Case("identifier-underscore-after", "read DATABASE_URL", tags=set()),
    Case("digits-glued", "retries2 is a variable", tags=set()),
    Case("longer-word", "we run postgresql 16", tags=set()),
    Case("plural-is-another-word", "our APIs", tags=set()),
    Case("slash-after", "performance/latency dashboards", tags=set()),
    Case("slash-before", "ops/performance dashboards", tags=set()),
    Case("module-file", "migrations.py failed", tags=set()),
    Case("sentence-period", "We use Redis.", tags={"caching"}),
    Case("question-mark", "Is there a policy on retries?", tags={"retry-backoff"}),
    Case("parentheses", "(backoff)", tags={"retry-backoff"}),
    Case("backticks", "run `postgres` locally", tags={"sql-migrations"}),
    Case("hash-prefix", "#performance issue", tags={"caching"}),
    Case("sentence-end-plural", "We need migrations.", tags={"sql-migrations"}),
    Case("upper-word", "The DATABASE is slow", tags={"sql-migrations"}),
    # --- @reference-id expansion --------------------------------------------------------
    Case("mention", "Apply @circuit-breaker here", mentions={"circuit-breaker"}),
    Case("mention-case-and-period", "see @Circuit-Breaker.", mentions={"circuit-breaker"}),
    Case("mention-two", "@circuit-breaker and @caching", mentions={"circuit-breaker", "caching"}),
    Case("mention-auto-source", "@python-style applies", mentions={"python-style"}),
    Case("mention-email-refused", "mail ops@circuit-breaker.io", mentions=set(), tags=set()),
    Case("mention-package-path-refused", "npm i @caching/redis-adapter", mentions=set()),
    Case("mention-dotted-call-refused", "@caching.cached(ttl=5)", mentions=set()),
    Case("mention-domain-refused", "follow @caching.io", mentions=set()),
    Case("mention-comma-and-parenthesis", "@caching, (@circuit-breaker)", mentions={"caching", "circuit-breaker"}),
    Case("mention-unknown", "@no-such-reference please", mentions=set()),
    Case("mention-withheld", "use @secrets-management", mentions=set(), withheld={"secrets-management"}),
    Case("mention-links", "@api-versioning", mentions={"api-versioning"},
         links={"rate-limiting", "retry-backoff"}),
    # --- path containment (tool results) ------------------------------------------------
    Case("path-root-readme", "$ cat service-template/README.md\n# New service template", surface="tool_result",
         pinned="service-template", context=True),
    Case("path-explicit-template", "...contents...", surface="tool_result",
         paths=["service-template/templates/health-endpoint.md"], pinned="service-template", context=False),
    Case("path-unindexed-script", "ran service-template/scripts/check-service.sh: ok", surface="tool_result",
         pinned="service-template", context=False),
    Case("path-absolute", f"read {DEMO_DIR / 'logging-policy.md'}", surface="tool_result",
         pinned="logging-policy"),
    Case("path-dot-slash", "cat ./logging-policy.md", surface="tool_result", pinned="logging-policy"),
    Case("path-not-preselected", "cat caching.md", surface="tool_result", pinned=None),
    Case("path-escape", "cat ../../etc/passwd", surface="tool_result", pinned=None),
    Case("path-in-prompt-ignored", "what is in service-template/README.md?", pinned=None),
    # --- semantic paraphrases -----------------------------------------------------------
    Case("paraphrase-transient", "how should we handle transient failures?",
         semantic={"circuit-breaker", "retry-backoff"}, tags=set()),
    Case("paraphrase-cascading", "prevent cascading service outages", semantic={"circuit-breaker"}),
    Case("paraphrase-downstream", "what do we do when a downstream dependency keeps failing?",
         semantic={"circuit-breaker"}),
    Case("paraphrase-throttle", "clients get too many requests errors and must slow down",
         semantic={"rate-limiting"}),
    Case("paraphrase-schema", "how do I rename a column in a large table without locking it?",
         semantic={"sql-migrations"}),
    # --- nothing ------------------------------------------------------------------------
    Case("nothing-poem", "write a poem about cats", nothing=True),
    Case("nothing-fox", "The quick brown fox jumps over the lazy dog.", nothing=True),
    Case("nothing-weather", "what's the weather like tomorrow?", nothing=True),
]


def _run(demo, case: Case):
    agent = Agent.objects.get(name="demo-agent")
    return enrich(caller=Caller.of(agent), text=case.text, surface=case.surface, paths=case.paths)


def _by(result, via: str) -> set[str]:
    return {h["source_id"] for h in result.hints if h["via"] == via}


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_detection(demo, case: Case):
    result = _run(demo, case)

    if case.nothing:
        assert result.hints == [] and result.pinned_reference is None, result.hints
        assert result.text == case.text
        return
    if case.tags is not None:
        assert _by(result, "tag") == case.tags
    assert case.semantic <= _by(result, "semantic")
    if case.mentions is not None:
        expanded = {h["source_id"] for h in result.hints if h["via"] == "mention" and h["injected"] == "expand"}
        assert expanded == case.mentions
        for ident in case.mentions:
            assert f"**Reference @{ident}:" in result.text
    if case.withheld is not None:
        assert {h["source_id"] for h in result.hints if h["withheld"]} == case.withheld
        for ident in case.withheld:
            assert f"**Reference @{ident}:" not in result.text
            assert f"@{ident}: " in result.text and "withheld: requires approval" in result.text
    assert case.links <= _by(result, "link")
    pinned = result.pinned_reference["source_id"] if result.pinned_reference else None
    assert pinned == case.pinned
    if case.context is not None:
        assert (result.pinned_reference["context"] is not None) == case.context


def test_table_is_large_enough():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("text", "paths"), [
    ("cat ./x.md and /usr/lib/java/ or ~/notes.txt, see a/b/c. The end...", ["x.md", "/usr/lib/java/", "~/notes.txt",
                                                                            "a/b/c"]),
    ("plain words, a sentence. Another one", []),
    ("version 1.2 of java.util.List", ["java.util.List"]),  # looks like a file name; containment decides
    ("~ / .. ... ./", []),
    ("src/app.py:12: error in app.py", ["src/app.py", "app.py"]),
    ("see service-template/README.md.", ["service-template/README.md"]),
])
def test_path_candidates(text, paths):
    from retrieval.enrichment.detection import path_candidates

    assert path_candidates(text) == paths


@pytest.mark.parametrize(("text", "words"), [
    ("The breaker opens after 5 failures (see RFC 7231).", "breaker opens after failures see RFC"),
    ("if (circuitBreaker.isOpen()) { return fallback_v2; }", "circuitBreaker isOpen return fallback_v2"),
    ("2024-01-05 12:00:01 ERROR [pool-3] timeout=30s", "ERROR pool-3 timeout"),
    ("Größe der Übertragung", "Größe der Übertragung"),
    ("", ""),
])
def test_tool_results_are_embedded_as_content_words(text, words):
    from retrieval.enrichment.detection import content_words

    assert content_words(text, 64) == words


def test_content_words_read_only_as_much_as_the_head_needs():
    from retrieval.enrichment.detection import CHARS_PER_HEAD_TOKEN, content_words

    text = "word " * 10_000

    assert content_words(text, 8).split() == ["word"] * (8 * CHARS_PER_HEAD_TOKEN // len("word "))


@pytest.mark.django_db
def test_an_extraction_stored_under_older_rules_is_redone(make_catalog):
    from catalog.sources.documents import DocumentInput
    from retrieval.enrichment.detection import catalog_index
    from retrieval.enrichment.discovery import discover
    from retrieval.models import SourceMentions
    from tests.factories import import_documents

    catalog = make_catalog("vendors")
    import_documents(catalog=catalog, slug="caching", documents=[DocumentInput("caching.md", "Caching", "Cache.", 6)])
    notes = import_documents(catalog=catalog, slug="vendor-notes", documents=[
        DocumentInput("vendor.md", "Vendor", "Questions go to support at @caching.io, not to us.", 50)])
    # what the first rules stored: "@caching.io" read as a mention of caching
    SourceMentions.objects.create(source=notes, fingerprint=notes.fingerprint, ids=["caching"], links=[])

    index = catalog_index(catalog)

    assert discover(index, [index.cards["vendor-notes"]], agent=None) == {}
    assert SourceMentions.objects.get(source=notes).ids == []


@pytest.mark.django_db
def test_a_catalog_qualified_mention_in_content_is_followed_within_its_catalog_only(make_catalog):
    from catalog.sources.documents import DocumentInput
    from retrieval.enrichment.detection import catalog_index
    from retrieval.enrichment.discovery import discover
    from tests.factories import import_documents

    catalog, other = make_catalog("vendors"), make_catalog("lab")
    for c in (catalog, other):
        import_documents(catalog=c, slug="caching", documents=[DocumentInput("caching.md", "Caching", "Cache.", 6)])
        import_documents(catalog=c, slug="queues", documents=[DocumentInput("queues.md", "Queues", "Queue.", 6)])
    import_documents(catalog=catalog, slug="notes", documents=[
        DocumentInput("notes.md", "Notes", "See @vendors/caching first, and @lab/queues for the lab's.", 60)])

    index = catalog_index(catalog)
    reached = discover(index, [index.cards["notes"]], agent=None)

    assert sorted(reached) == ["caching"]
    assert [p["evidence"] for p in reached["caching"].parents] == ["@vendors/caching"]


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["the circuit breaker opens on timeouts", "cache invalidation with redis"])
def test_the_semantic_margin_is_measured_from_the_best_match_of_any_pass(demo, text):
    # given a prompt whose best semantic match is a reference its tags found
    agent = Agent.objects.get(name="demo-agent")

    result = enrich(caller=Caller.of(agent), text=text, surface="prompt")

    best = max(result.hints, key=lambda h: h["score"] or 0.0)
    assert best["via"] == "tag"
    floor = best["score"] - agent.semantic_margin
    assert [h["source_id"] for h in result.hints if h["via"] == "semantic" and h["score"] < floor] == []
    (step,) = [s for s in result.trace.steps if s["pass"] == "semantic"]
    assert step["threshold"] >= floor - 1e-4  # both rounded to 4 places


@pytest.mark.django_db
def test_a_reference_found_by_several_passes_keeps_every_reason(make_catalog):
    # given two references that link to each other and are about the same thing
    from catalog.sources.documents import DocumentInput
    from tests.factories import import_documents

    catalog = make_catalog("cycles")
    import_documents(catalog=catalog, slug="cyc-a", documents=[DocumentInput(
        "cyc-a.md", "Retry budgets", "# Retry budgets\n\nA retry budget caps how many retries a client may send "
        "with exponential backoff. See @cyc-b.", 120)])
    import_documents(catalog=catalog, slug="cyc-b", documents=[DocumentInput(
        "cyc-b.md", "Exponential backoff", "# Exponential backoff\n\nRetries back off exponentially with jitter, "
        "within the client's retry budget. See @cyc-a.", 120)])
    agent, _ = agent_with_token(name="cycler", catalogs=[catalog])

    # when a prompt names one and means both
    result = enrich(caller=Caller.of(agent), text="@cyc-a: what retry budget and exponential backoff should the "
                    "client use?", surface="prompt")

    # then the other is hinted as linked from the first, and every pass that found it is kept
    (hint,) = [h for h in result.hints if h["source_id"] == "cyc-b"]
    assert (hint["via"], hint["matched"], hint["injected"]) == ("link", ["@cyc-a"], "hint")
    assert [reason["via"] for reason in hint["reasons"]] == ["link", "semantic"]
    assert hint["score"] is not None
    assert "- @cyc-b: cyc-b (linked from @cyc-a)" in result.text
    steps = {s["pass"]: s for s in result.trace.steps}
    assert "cycles/cyc-b" in steps["semantic"]["candidates"]
    assert [c["source_id"] for c in steps["link"]["candidates"]] == ["cyc-b"]
