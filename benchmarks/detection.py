"""The measurements behind `python -m benchmarks bench_detect`; pure Python.

Tag detection (`detection_benchmark`):
  1. a deterministic synthetic vocabulary: 1-3 word tags drawn from a word list of
     software and operations terms, spelled with spaces, hyphens or in Title Case, plus
     a few special tags (c++, .net, node.js, ci/cd)
  2. a deterministic text of the given size in UTF-8 bytes, mixing prose, code, log
     lines, paths and markdown: some dozens of tag mentions in every separator and case
     variant, and guard traps (dotted names, paths, longer identifiers)
  3. check that `TagMatcher.find` and the per-tag regex loop return identical hits
  4. time both on that text, the loop's patterns compiled before the timing, and the
     matcher's build
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from catalog.tag_keys import tag_key
from retrieval.enrichment.tagmatch import TagMatcher, scan_patterns, tag_patterns
from retrieval.evaluation.metrics import percentile

TARGET_P50_MS = 1.0  # TagMatcher.find on 4 KB against 10,000 tags
TARGET_RATIO = 20.0  # ... at least this many times faster than the regex loop
SINGLE_WORD_TAGS = 4  # one word in this many is a tag by itself: most of a text's words are no tag

WORDS = (
    "access account adapter agent alert algorithm analytics api application archive async audit auth "
    "authentication authorization availability backend backoff backup balancer batch benchmark billing blob "
    "breaker broker budget buffer build bulkhead bundle cache canary capacity catalog certificate channel "
    "checkpoint circuit client cloud cluster code commit compaction compliance compression concurrency config "
    "connection consensus consistency consumer container contract controller cookie cost cqrs crash cron "
    "dashboard data database deadline deadlock debug decorator delivery dependency deployment design "
    "discovery disk dns docker document domain driven drift durability edge elastic embedding encryption "
    "endpoint engine error event eventual exception exporter failover feature federation fencing filter "
    "firewall flag flow form framework function gateway graph grpc guard handler hashing header health "
    "heartbeat hook idempotency identity image incident index ingress injection inventory isolation job "
    "journal json kafka key kubernetes lambda latency layer lease ledger library lifecycle limit lineage load "
    "lock log logging mapping marker memory mesh message metadata metric migration mobile model module "
    "monitoring mutex namespace network node notification oauth object observability offset operator "
    "orchestration outbox pagination partition password patch payment performance permission pipeline "
    "platform plugin policy pool port postgres privacy probe profile protocol provider proxy queue quorum "
    "quota rate reader readiness rebalance recovery redis reference region registry release reliability "
    "replica replication repository request resilience resource response rest retention retry review "
    "rollback rollout routing runtime saga sampling scaling schema scheduler search secret security segment "
    "serialization server service session shard sharding sidecar signal snapshot socket span sql storage "
    "stream streaming subscription tenant test testing thread throttling timeout token topic trace tracing "
    "transaction transport trigger ttl upgrade usage user validation vault vector version webhook window "
    "worker workflow write"
).split()
# Tags that are not plain words, as real vocabularies hold them: most hold other characters.
SPECIAL_TAGS = tuple(
    "C++ C# F# .NET Node.js Vue.js Next.js CI/CD TCP/IP I/O PL/SQL Objective-C UTF-8 HTTP/2 S3:// @scope k8s".split()
) + ("ASP.NET Core", "A/B testing", "OAuth 2.0")
FILLER = (
    "the a an of to in and or for with when we it this that is are was be not on at by from then so if "
    "which every after before our their each all some more than only also should must can will"
).split()


class DetectionMismatch(Exception):
    """The matcher and the regex loop disagree on the benchmark text."""


@dataclass(frozen=True)
class DetectionBenchmark:
    tags: int
    keys: int
    irregular_tags: int  # holding characters other than letters, digits and separators
    text_bytes: int
    text_chars: int
    hits: int
    repeat: int
    baseline_repeat: int
    seed: int
    build_ms: float  # median TagMatcher(tags) construction
    baseline_compile_ms: float  # compiling the per-tag regexes, once
    matcher_p50_ms: float
    matcher_p95_ms: float
    loop_p50_ms: float
    loop_p95_ms: float
    load_average: float  # 1-minute load before the timing: on 2 shared cores, other work shows here

    @property
    def ratio(self) -> float:
        return self.loop_p50_ms / self.matcher_p50_ms

    def missed(self) -> list[str]:
        """The targets this run missed, in words."""
        missed = []
        if self.matcher_p50_ms > TARGET_P50_MS:
            missed.append(f"matcher p50 {self.matcher_p50_ms:.3f} ms > {TARGET_P50_MS} ms")
        if self.ratio < TARGET_RATIO:
            missed.append(f"speed-up {self.ratio:.1f}x < {TARGET_RATIO:.0f}x")
        return missed

    def as_dict(self) -> dict[str, object]:
        return {
            **asdict(self),
            "ratio": self.ratio,
            "targets": {"matcher_p50_ms": TARGET_P50_MS, "ratio": TARGET_RATIO},
            "missed": self.missed(),
        }


def synthetic_tags(count: int, *, seed: int) -> list[str]:
    """`count` tags with distinct keys: the special ones, then random 1-3 word tags
    from WORDS (only a quarter of the words are tags by themselves)."""
    rng = random.Random(seed)
    tags = list(SPECIAL_TAGS[:count])
    keys = {tag_key(tag) for tag in tags}
    singles = rng.sample(WORDS, len(WORDS) // SINGLE_WORD_TAGS)
    while len(tags) < count:
        size = rng.choices((1, 2, 3), weights=(1, 5, 4))[0]
        words = rng.sample(singles, 1) if size == 1 else rng.sample(WORDS, size)
        style = rng.random()
        tag = "-".join(words) if style < 0.3 else " ".join(words).title() if style < 0.45 else " ".join(words)
        if tag_key(tag) not in keys:
            keys.add(tag_key(tag))
            tags.append(tag)
    rng.shuffle(tags)
    return tags


def _mention(tag: str, rng: random.Random) -> str:
    """`tag` as a text might write it: any separator, any case."""
    words = tag_key(tag).split("-")
    separator = rng.choice([" ", " ", "-", "_", "\n", "  "])
    text = separator.join(words)
    return rng.choice([text, text, text.title(), text.upper()])


def _sentence(tags: list[str], rng: random.Random) -> str:
    words = [rng.choice(FILLER if rng.random() < 0.6 else WORDS) for _ in range(rng.randint(6, 14))]
    for _ in range(rng.randint(0, 2)):
        words.insert(rng.randrange(len(words) + 1), _mention(rng.choice(tags), rng))
    return " ".join(words).capitalize() + rng.choice([". ", ". ", ", ", "! ", "? ", "...\n"])


def _code_line(tags: list[str], rng: random.Random) -> str:
    a, b, c = (rng.choice(WORDS) for _ in range(3))
    return rng.choice(
        [
            f"from {a}.{b} import {c.title()}{a.title()}\n",
            f"my_{a}_{b}_v2 = {c}.{a}_{b}(timeout=30)\n",
            f'config["{a}-{b}-{c}"] = {a.upper()}_{b.upper()}\n',
            f"    raise {a.title()}{b.title()}Error(`{_mention(rng.choice(tags), rng)}`)\n",
            f"import java.util.{a.title()}; // {b}.{c}()\n",
        ]
    )


def _path_or_log(tags: list[str], rng: random.Random) -> str:
    a, b, c = (rng.choice(WORDS) for _ in range(3))
    return rng.choice(
        [
            f"/usr/lib/{a}/{b}/{c}.py\n",
            f"./src/{a}-{b}/{c}_{a}.ts:42:7\n",
            f"2024-05-01T12:00:03Z ERROR [{a}-{b}] {_mention(rng.choice(tags), rng)} failed: {c}.{a}Exception\n",
            f"- **{_mention(rng.choice(tags), rng)}** (see [{b}](docs/{c}.md))\n",
            f"# {_mention(rng.choice(tags), rng).title()}\n",
            f"Ported from {rng.choice(SPECIAL_TAGS)} to {rng.choice(SPECIAL_TAGS)}; café naïve {a}.\n",
        ]
    )


def synthetic_text(tags: list[str], *, size_bytes: int, seed: int) -> str:
    """A text of exactly `size_bytes` UTF-8 bytes (less at most 3 where a character would
    straddle the end): prose, code, paths, logs and markdown mentioning some tags."""
    rng = random.Random(seed)
    pieces: list[str] = []
    length = 0
    while length < size_bytes:
        kind = rng.random()
        piece = (
            _sentence(tags, rng) if kind < 0.5 else _code_line(tags, rng) if kind < 0.75 else (_path_or_log(tags, rng))
        )
        pieces.append(piece)
        length += len(piece.encode())
    return "".join(pieces).encode()[:size_bytes].decode(errors="ignore")


def _timings_ms(call: Callable[[], object], repeat: int) -> list[float]:
    gc.collect()
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def detection_benchmark(
    *, tags: int = 10_000, text_bytes: int = 4096, repeat: int = 300, baseline_repeat: int = 5, seed: int = 42
) -> DetectionBenchmark:
    """Time TagMatcher.find against the per-tag regex loop on one synthetic text."""
    vocabulary = synthetic_tags(tags, seed=seed)
    text = synthetic_text(vocabulary, size_bytes=text_bytes, seed=seed)
    builds = _timings_ms(lambda: TagMatcher(vocabulary), 5)
    matcher = TagMatcher(vocabulary)
    compile_started = time.perf_counter()
    patterns = tag_patterns(vocabulary)
    compile_ms = (time.perf_counter() - compile_started) * 1000
    expected = scan_patterns(patterns, text)
    if matcher.find(text) != expected:
        raise DetectionMismatch("TagMatcher.find and the regex loop disagree on the benchmark text")
    load_average = os.getloadavg()[0]
    _timings_ms(lambda: matcher.find(text), 5)  # warm-up
    fast = _timings_ms(lambda: matcher.find(text), repeat)
    slow = _timings_ms(lambda: scan_patterns(patterns, text), baseline_repeat)
    return DetectionBenchmark(
        tags=len(vocabulary),
        keys=len(matcher),
        irregular_tags=sum(not tag_key(t).replace("-", "").isalnum() for t in vocabulary),
        text_bytes=len(text.encode()),
        text_chars=len(text),
        hits=len(expected),
        repeat=repeat,
        baseline_repeat=baseline_repeat,
        seed=seed,
        build_ms=statistics.median(builds),
        baseline_compile_ms=compile_ms,
        matcher_p50_ms=percentile(fast, 50),
        matcher_p95_ms=percentile(fast, 95),
        loop_p50_ms=percentile(slow, 50),
        loop_p95_ms=percentile(slow, 95),
        load_average=load_average,
    )
