"""A trace told in plain words (retrieval.traces.story, pure): each reference's
outcome and why, each pass in a sentence, and where each tag matched, from the trace's
own record, old traces (without the fields added since) included."""

from __future__ import annotations

from typing import Any

from retrieval.traces.story import Part, tag_parts, trace_story

TEXT = "Our Circuit-Breaker trips when redis is slow; see @caching."
STEPS: list[dict[str, Any]] = [
    {"pass": "mention", "ms": 0.1, "candidates": [
        {"source_id": "caching", "catalog": "demo", "ref": "caching", "name": "Caching", "matched": ["@caching"],
         "injected": "expand"}]},
    {"pass": "tag", "ms": 0.2, "candidates": 2, "tags": {"circuit breaker": ["demo/circuit-breaker"],
                                                          "redis": ["demo/caching"]},
     "at": {"circuit breaker": [4, 19], "redis": [31, 36]}},
    {"pass": "semantic", "ms": 9.0, "model": "minilm", "threshold": 0.41, "floor": 0.3, "margin": 0.1,
     "embedded_tokens": 128, "embedded_text": "as written", "candidates": {"demo/retry-backoff": 0.51},
     "nearest_below_threshold": {"demo/rate-limiting": 0.33}},
    {"pass": "link", "ms": 0.3, "discovered": [{"source_id": "circuit-breaker", "catalog": "demo", "depth": 1,
                                                "parents": [{"source_id": "caching", "via": "mention",
                                                             "evidence": "@circuit-breaker"}]}], "candidates": []},
    {"pass": "rank", "ms": 0.0, "max_hints": 5, "kept": ["demo/circuit-breaker", "demo/retry-backoff"], "cut": 0},
    {"pass": "governance", "ms": 0.4, "decisions": [
        {"source_id": "caching", "catalog": "demo", "allowed": True, "state": "not_required", "reason": "",
         "request_id": None},
        {"source_id": "circuit-breaker", "catalog": "demo", "allowed": False, "state": "missing",
         "reason": "requires approval; no reviewer has approved it for this agent", "request_id": None,
         "request_due": True},
        {"source_id": "retry-backoff", "catalog": "demo", "allowed": True, "state": "approved", "reason": "",
         "request_id": 7}]},
    {"pass": "format", "ms": 0.1, "blocks": 2},
]
HINTS: list[dict[str, Any]] = [
    {"source_id": "caching", "catalog": "demo", "ref": "caching", "name": "Caching", "matched": ["@caching"],
     "via": "mention", "reasons": [{"via": "mention", "matched": ["@caching"]}, {"via": "tag", "matched": ["redis"]}],
     "score": None, "injected": "expand", "withheld": False, "reason": "", "request_id": None},
    {"source_id": "circuit-breaker", "catalog": "demo", "ref": "circuit-breaker", "name": "Circuit breaker",
     "matched": ["@caching"], "via": "link", "reasons": [{"via": "link", "matched": ["@caching"]},
                                                         {"via": "tag", "matched": ["circuit breaker"]}],
     "score": 0.38, "injected": "hint", "withheld": True,
     "reason": "requires approval; no reviewer has approved it for this agent", "request_id": None},
    {"source_id": "retry-backoff", "catalog": "demo", "ref": "retry-backoff", "name": "Retry", "matched": [],
     "via": "semantic", "score": 0.51, "injected": "hint", "withheld": False, "reason": ""},
]


def story(**fields):
    return trace_story(**{"steps": STEPS, "hints": HINTS, "text_read": TEXT, "text_received": TEXT, **fields})


def test_each_reference_says_what_became_of_it_and_every_pass_that_found_it():
    outcomes = {o.ref: o for o in story().outcomes}

    assert outcomes["caching"].action == "expanded" and outcomes["caching"].found_by == [
        "mentioned as @caching", "tag “redis” in the text"]
    breaker = outcomes["circuit-breaker"]
    assert breaker.action == "withheld" and breaker.withheld and breaker.request_due and breaker.state == "missing"
    assert breaker.found_by == ["linked from @caching", "tag “circuit breaker” in the text"]
    assert outcomes["retry-backoff"].found_by == ["close in meaning (similarity 0.51)"]
    assert [o.ref for o in story().injected] == ["caching", "retry-backoff"]


def test_each_pass_is_a_sentence_with_what_it_found():
    steps = {step.name: step for step in story().steps}

    assert [step.title for step in story().steps] == [
        "@mentions", "Tags", "Meaning", "Links", "Ranking", "Approval gate", "Text sent back"]
    assert steps["tag"].items == ["“circuit breaker” at characters 5–19: carried by demo/circuit-breaker.",
                                  "“redis” at characters 32–36: carried by demo/caching."]
    assert "similarity of 0.41 or more" in steps["semantic"].summary
    assert steps["semantic"].items == ["demo/retry-backoff: 0.51 — qualifies.",
                                       "demo/rate-limiting: 0.33 — below the line."]
    assert steps["governance"].summary.endswith("2 allowed, 1 withheld.")
    assert "this dry run raised none" in steps["governance"].items[1]
    assert steps["governance"].items[2] == "demo/retry-backoff: allowed, approved (request #7)."


def test_the_text_is_cut_where_the_tags_are():
    parts = story().text_parts

    assert "".join(part.text for part in parts) == TEXT
    assert [part for part in parts if part.tags] == [Part("Circuit-Breaker", ("circuit breaker",)),
                                                      Part("redis", ("redis",))]


def test_overlapping_tags_share_their_characters():
    parts, placed = tag_parts("a circuit breaker", {"circuit breaker": [2, 17], "breaker": [10, 17]})

    assert placed and parts == [Part("a "), Part("circuit ", ("circuit breaker",)),
                                Part("breaker", ("breaker", "circuit breaker"))]


def test_a_place_that_does_not_hold_its_tag_is_not_marked():
    parts, placed = tag_parts("redis and more", {"redis": [4, 9], "cache": [40, 45]})

    assert not placed and parts == [Part("redis and more")]


def test_an_old_trace_without_places_or_reasons_reads_as_well():
    old_steps = [{key: value for key, value in step.items() if key != "at"} for step in STEPS]
    old_hints = [{key: value for key, value in hint.items() if key not in ("reasons", "ref")} for hint in HINTS]

    told = trace_story(steps=old_steps, hints=old_hints, text_read=TEXT, text_received=TEXT)

    assert told.text_parts == [Part(TEXT)] and told.tags_placed
    assert told.outcomes[0].ref == "demo/caching" and told.outcomes[0].found_by == ["mentioned as @caching"]


def test_a_text_not_kept_has_no_parts_and_a_long_one_is_shown_in_part():
    assert story(text_read=None, text_received=None).text_parts is None

    long = story(text_read=TEXT + "x" * 100, text_received=TEXT + "x" * 100, show_chars=len(TEXT))
    assert long.hidden_chars == 100 and long.tags_placed


def test_what_earlier_injections_took_is_counted():
    assert story(text_received=TEXT + "\n\n**injected** block").stripped_chars == len("\n\n**injected** block")
