"""Tag detection: the rules, case by case, against both implementations; and the fast
matcher against the per-tag regex loop on random texts (pure, no DB)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from benchmarks.detection import synthetic_tags, synthetic_text
from catalog.tag_keys import tag_key
from retrieval.enrichment.tagmatch import TagHit, TagMatcher, fold, regex_loop_find

RESILIENCE = ["circuit breaker", "resilience", "java", "util", "lib"]
IRREGULAR = ["C++", "C#", ".NET", "Node.js", "CI/CD", "ASP.NET Core"]

# (id, tags, text, expected [(tag as curated, text as matched)] in hit order)
CASES = [
    # separators between a tag's words
    ("space", RESILIENCE, "add a circuit breaker here", [("circuit breaker", "circuit breaker")]),
    ("hyphen", RESILIENCE, "the circuit-breaker opens", [("circuit breaker", "circuit-breaker")]),
    ("underscore", RESILIENCE, "call circuit_breaker()", [("circuit breaker", "circuit_breaker")]),
    ("line-break", RESILIENCE, "a circuit\nbreaker", [("circuit breaker", "circuit\nbreaker")]),
    ("crlf", RESILIENCE, "a circuit\r\nbreaker", [("circuit breaker", "circuit\r\nbreaker")]),
    ("wrapped-and-indented", RESILIENCE, "a circuit\n    breaker", [("circuit breaker", "circuit\n    breaker")]),
    ("two-spaces", RESILIENCE, "circuit  breaker", [("circuit breaker", "circuit  breaker")]),
    ("tab", RESILIENCE, "circuit\tbreaker", [("circuit breaker", "circuit\tbreaker")]),
    ("nbsp", RESILIENCE, "circuit\u00a0breaker", [("circuit breaker", "circuit\u00a0breaker")]),
    ("double-underscore", RESILIENCE, "circuit__breaker", []),
    ("double-hyphen", RESILIENCE, "circuit--breaker", []),
    ("hyphen-and-space", RESILIENCE, "circuit- breaker", []),
    ("underscore-and-hyphen", RESILIENCE, "circuit_-breaker", []),
    ("no-separator", RESILIENCE, "circuitbreaker", []),
    ("dot-is-no-separator", RESILIENCE, "circuit.breaker", []),
    ("tag-spelled-with-underscore", ["circuit_breaker"], "a Circuit Breaker", [("circuit_breaker", "Circuit Breaker")]),
    ("tag-spelled-loosely", [" Circuit -_ Breaker "], "circuit-breaker", [(" Circuit -_ Breaker ", "circuit-breaker")]),
    # case
    ("upper", RESILIENCE, "CIRCUIT BREAKER", [("circuit breaker", "CIRCUIT BREAKER")]),
    ("title", RESILIENCE, "Circuit Breaker", [("circuit breaker", "Circuit Breaker")]),
    ("camel-is-one-word", RESILIENCE, "CircuitBreaker", []),
    # guards: dotted names, paths, longer identifiers, digits
    ("dotted-name", RESILIENCE, "import java.util.List;", []),
    ("dotted-tail", ["list"], "java.util.List", []),
    ("path", RESILIENCE, "see /usr/lib/java/ now", []),
    ("relative-path", RESILIENCE, "src/resilience/policy.py", []),
    ("file-name", RESILIENCE, "open resilience.py", []),
    ("longer-identifier-underscore", RESILIENCE, "my_circuit_breaker_v2 = 1", []),
    ("longer-identifier-hyphen", RESILIENCE, "circuit-breaker-v2", []),
    ("prefix-underscore", RESILIENCE, "_resilience", []),
    ("suffix-underscore", RESILIENCE, "resilience_", []),
    ("prefix-hyphen", RESILIENCE, "-resilience", []),
    ("suffix-hyphen", RESILIENCE, "resilience-", []),
    ("suffix-slash", RESILIENCE, "resilience/", []),
    ("digit-after", RESILIENCE, "resilience2", []),
    ("digit-before", RESILIENCE, "2resilience", []),
    ("plural", RESILIENCE, "two circuit breakers", []),
    ("inside-word", RESILIENCE, "javascript and ajava", []),
    ("dot-then-slash", RESILIENCE, "java./bin", []),
    ("dot-then-underscore", RESILIENCE, "java._x", []),
    ("list-item-dash", RESILIENCE, "- resilience", [("resilience", "resilience")]),
    ("at-sign-is-no-guard", RESILIENCE, "@circuit-breaker", [("circuit breaker", "circuit-breaker")]),
    # sentence punctuation
    ("sentence-end", RESILIENCE, "We use Java.", [("java", "Java")]),
    ("ellipsis", RESILIENCE, "Java...", [("java", "Java")]),
    ("period-then-space", RESILIENCE, "Use java. Then", [("java", "java")]),
    ("period-then-newline", RESILIENCE, "java.\nnext", [("java", "java")]),
    (
        "comma-semicolon-bang",
        RESILIENCE,
        "lib, java; resilience!",
        [("lib", "lib"), ("java", "java"), ("resilience", "resilience")],
    ),
    ("question-colon", RESILIENCE, "Java? resilience: yes", [("java", "Java"), ("resilience", "resilience")]),
    # brackets, quotes, markdown
    ("bold", RESILIENCE, "**circuit breaker**", [("circuit breaker", "circuit breaker")]),
    ("parentheses", RESILIENCE, "(resilience)", [("resilience", "resilience")]),
    ("backticks", RESILIENCE, "`circuit_breaker`", [("circuit breaker", "circuit_breaker")]),
    ("double-quotes", RESILIENCE, '"Resilience"', [("resilience", "Resilience")]),
    ("single-quotes", RESILIENCE, "'java'", [("java", "java")]),
    ("heading", RESILIENCE, "# Circuit Breaker\n", [("circuit breaker", "Circuit Breaker")]),
    ("link-text", RESILIENCE, "[circuit breaker](docs/cb.md)", [("circuit breaker", "circuit breaker")]),
    ("html-tag", RESILIENCE, "<b>java</b>", [("java", "java")]),
    ("log-line", RESILIENCE, "ERROR [resilience] retry=3", [("resilience", "resilience")]),
    # overlapping tags, first occurrence, same key
    (
        "overlap",
        ["circuit breaker", "breaker", "circuit"],
        "circuit breaker",
        [("circuit breaker", "circuit breaker"), ("circuit", "circuit"), ("breaker", "breaker")],
    ),
    ("first-occurrence-only", RESILIENCE, "Java, then java", [("java", "Java")]),
    (
        "shorter-first-longer-later",
        ["circuit", "circuit breaker"],
        "circuit, then circuit breaker",
        [("circuit", "circuit"), ("circuit breaker", "circuit breaker")],
    ),
    (
        "same-key-collapses",
        ["Circuit Breaker", "circuit-breaker"],
        "circuit_breaker",
        [("Circuit Breaker", "circuit_breaker")],
    ),
    (
        "three-words",
        ["site reliability engineering"],
        "Site-Reliability\nEngineering",
        [("site reliability engineering", "Site-Reliability\nEngineering")],
    ),
    ("three-words-broken", ["site reliability engineering"], "site reliability. engineering", []),
    # tags holding other characters
    ("cpp", IRREGULAR, "Written in C++, mostly.", [("C++", "C++")]),
    ("cpp-in-name", IRREGULAR, "link libc++ statically", []),
    ("csharp", IRREGULAR, "C# and F#", [("C#", "C#")]),
    ("dotnet", IRREGULAR, "runs on .NET 8", [(".NET", ".NET")]),
    ("dotnet-in-name", IRREGULAR, "asp.net", []),
    ("nodejs", IRREGULAR, "a Node.js service", [("Node.js", "Node.js")]),
    ("nodejs-longer", IRREGULAR, "node.jsx", []),
    ("cicd", IRREGULAR, "our CI/CD pipeline", [("CI/CD", "CI/CD")]),
    ("cicd-path", IRREGULAR, "ci/cd/stage", []),
    ("aspnet-core-wrapped", IRREGULAR, "ASP.NET\ncore", [("ASP.NET Core", "ASP.NET\ncore")]),
    ("word-tag-inside-irregular", ["cd", "ci"], "ci/cd", []),
    ("k8s", ["k8s"], "a k8s cluster; k8s.io", [("k8s", "k8s")]),
    ("utf-8", ["utf-8"], "UTF8, utf_8", [("utf-8", "utf_8")]),
    # unicode
    ("accent", ["café"], "Le CAFÉ est", [("café", "CAFÉ")]),
    ("accent-longer-word", ["café"], "caféine", []),
    ("cjk", ["日本語"], "日本語 テキスト", [("日本語", "日本語")]),
    ("cjk-inside-word", ["日本"], "日本語", []),
    ("dotted-capital-i", ["istanbul"], "Visit İSTANBUL.", [("istanbul", "İSTANBUL")]),
    ("eszett", ["straße"], "STRAßE", [("straße", "STRAßE")]),
    ("accented-multiword", ["naïve bayes"], "a naïve_Bayes model", [("naïve bayes", "naïve_Bayes")]),
    # nothing to find
    ("empty-text", RESILIENCE, "", []),
    ("blank-text", RESILIENCE, " \n\t ", []),
    ("no-tags", [], "circuit breaker", []),
    ("empty-tags", ["", " - _ "], "circuit breaker", []),
    ("unrelated", RESILIENCE, "the breaker box in the basement", []),
    ("punctuation-only", RESILIENCE + IRREGULAR, "... --- /// +++ ###", []),
]


@pytest.fixture(params=["matcher", "regex-loop"])
def find(request):
    if request.param == "matcher":
        return lambda tags, text: TagMatcher(tags).find(text)
    return regex_loop_find


@pytest.mark.parametrize(("tags", "text", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_detects_tags_by_the_rules(find, tags, text, expected):
    hits = find(tags, text)

    assert [(hit.tag, hit.text) for hit in hits] == expected
    assert all(hit.text == text[hit.start : hit.end] for hit in hits)


def test_case_ids_are_unique():
    assert len({case[0] for case in CASES}) == len(CASES) >= 45


def test_a_hit_carries_tag_key_and_offsets_into_the_original_text():
    text = "İİ then Circuit-Breaker."

    assert TagMatcher(["Circuit Breaker"]).find(text) == [
        TagHit(tag="Circuit Breaker", key="circuit-breaker", start=8, end=23, text="Circuit-Breaker")
    ]


def test_hits_are_ordered_by_start_then_longer_first():
    hits = TagMatcher(["b c", "a", "c", "a b c", "b"]).find("a b c")

    assert [(hit.key, hit.start, hit.end) for hit in hits] == [
        ("a-b-c", 0, 5),
        ("a", 0, 1),
        ("b-c", 2, 5),
        ("b", 2, 3),
        ("c", 4, 5),
    ]


def test_the_matcher_maps_each_key_to_its_spellings():
    matcher = TagMatcher(["Circuit Breaker", "circuit-breaker", "Circuit Breaker", "java", "---"])

    assert matcher.tags_by_key == {"circuit-breaker": ("Circuit Breaker", "circuit-breaker"), "java": ("java",)}
    assert len(matcher) == 2


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Circuit Breaker", "circuit-breaker"),
        ("circuit_breaker", "circuit-breaker"),
        ("  Circuit -_ Breaker\n", "circuit-breaker"),
        ("-leading-and-trailing-", "leading-and-trailing"),
        ("C++", "c++"),
        ("ASP.NET Core", "asp.net-core"),
        ("_ -", ""),
    ],
)
def test_tag_key_folds_case_and_separator_runs(name, key):
    assert tag_key(name) == key


def test_fold_keeps_offsets_where_lowercase_would_grow():
    assert fold("İSTANBUL Σ") == "istanbul σ"
    assert len(fold("İ" * 5)) == 5


def test_a_matcher_is_reusable_across_texts():
    matcher = TagMatcher(RESILIENCE)

    assert [hit.key for hit in matcher.find("java")] == ["java"]
    assert [hit.key for hit in matcher.find("resilience")] == ["resilience"]


# --- the fast matcher equals the per-tag regex loop ---------------------------------------

# Tags of every shape: plain words, shared prefixes, overlaps, digits, accents, and tags
# holding other characters, with leading and trailing punctuation, and with none of a word.
VOCABULARY = [
    *"circuit breaker Circuit-Breaker-V2 java util lib v2 a b x_y k8s utf-8 café 日本語 istanbul σ".split(),
    *["circuit breaker", "java util", "a b", "a b c", "b c"],
    *"c++ c# .net node.js ci/cd a.b x/ #a ++ ._x a.-b".split(),
    "asp.net core",
]
WORDS = (
    "circuit breaker java util lib v2 a b c x y k8s utf 8 café caf 日本語 日本 istanbul İstanbul net node js ci cd "
    "asp core σ ς"
).split()
GLUE = [
    " ",
    "  ",
    "\n",
    "\t",
    "\r\n",
    "\u00a0",
    "\u2028",
    ". ",
    *"_ __ - -- -_ . .. / ./ + ++ # ( ) ` * ** , ! ? ' \" @ é 1 Σ".split(),
]
CASED_WORDS = st.sampled_from(WORDS).flatmap(lambda w: st.sampled_from([w, w.upper(), w.title()]))
TEXTS = st.one_of(
    st.lists(st.one_of(CASED_WORDS, st.sampled_from(GLUE)), max_size=40).map("".join),
    st.text(alphabet="abcjv28._-/ \n+#İé", max_size=60),
)
RANDOM_TAGS = st.lists(
    st.lists(st.one_of(st.sampled_from(WORDS), st.sampled_from(GLUE)), min_size=1, max_size=4).map("".join), max_size=8
)


@settings(max_examples=600, deadline=None)
@given(text=TEXTS)
@example(text="We use Java. java.util circuit\nbreaker my_circuit_breaker_v2")
def test_matcher_equals_the_regex_loop_on_random_texts(text):
    assert TagMatcher(VOCABULARY).find(text) == regex_loop_find(VOCABULARY, text)


@settings(max_examples=400, deadline=None)
@given(tags=RANDOM_TAGS, text=TEXTS)
def test_matcher_equals_the_regex_loop_on_random_vocabularies(tags, text):
    assert TagMatcher(tags).find(text) == regex_loop_find(tags, text)


# --- on the tag detection benchmark's synthetic text (benchmarks.detection) ----------------


def test_matcher_equals_the_regex_loop_on_the_benchmark_corpus():
    tags = synthetic_tags(1000, seed=3)
    text = synthetic_text(tags, size_bytes=4096, seed=3)

    hits = TagMatcher(tags).find(text)

    assert hits == regex_loop_find(tags, text)
    assert len(hits) >= 24  # some dozens of mentions, traps around them
