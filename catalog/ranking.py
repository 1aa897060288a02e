"""A catalog's ranking settings: how its search ranks and fuses, and how close in meaning
enrichment's semantic pass wants a reference. Stored as the settings that differ from
the defaults (Catalog.ranking, jsonb), so a catalog nobody tuned ranks as every catalog
did before it had settings; a request may still name its mode, fusion and weights.

The defaults are the constants every figure of docs/benchmarks.md was measured with:
Okapi BM25's k1 1.2 and b 0.75 (rank_bm25's), reciprocal rank fusion with k 60, each
component read 100 deep before fusing.

Pure Python: retrieval.search reads it, catalog stores it, the tuning runs search it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

MODES = ("bm25", "vector", "hybrid", "bm25_tiebreak")
FUSIONS = ("rrf", "convex")
NORMALISATIONS = ("minmax", "zscore")

# (least, greatest) of each number; None where the setting may be left to the agent.
LIMITS: dict[str, tuple[float, float]] = {
    "rrf_k": (1, 1000), "bm25_weight": (0.0, 10.0), "vector_weight": (0.0, 10.0),
    "k1": (0.0, 5.0), "b": (0.0, 1.0), "fusion_depth": (10, 1000),
    "vector_feedback": (0, 20), "feedback_weight": (0.0, 2.0),
    "bm25_feedback": (0, 50), "bm25_feedback_terms": (1, 100), "bm25_feedback_weight": (0.0, 1.0),
    "semantic_threshold": (0.0, 1.0), "semantic_margin": (0.0, 1.0),
}
CHOICES: dict[str, tuple[str, ...]] = {"mode": MODES, "fusion": FUSIONS, "normalization": NORMALISATIONS}
WHOLE = ("rrf_k", "fusion_depth", "vector_feedback", "bm25_feedback", "bm25_feedback_terms")


@dataclass(frozen=True)
class RankingSettings:
    mode: str = "hybrid"  # what a search that names no mode runs
    fusion: str = "rrf"  # hybrid's: reciprocal rank fusion, or a convex sum of normalised scores
    rrf_k: int = 60  # a hit ranked r adds weight / (k + r): the larger k, the flatter
    bm25_weight: float = 1.0  # each component's weight in either fusion (convex: divided by their sum)
    vector_weight: float = 1.0
    normalization: str = "minmax"  # convex's: min-max or z-score per list
    k1: float = 1.2  # how fast a term's repeats in a chunk saturate
    b: float = 0.75  # how much a chunk longer than the average is discounted
    fusion_depth: int = 100  # how deep each component list is read before fusing
    # Pseudo-relevance feedback on the vector side: the query's vector moved toward the
    # mean of its first search's best `vector_feedback` chunks (weight `feedback_weight`)
    # and searched again; 0: off.
    vector_feedback: int = 0
    feedback_weight: float = 0.5
    # Pseudo-relevance feedback on the BM25 side (RM3): the `bm25_feedback_terms` terms
    # most typical of a first BM25 search's best `bm25_feedback` chunks added to the
    # query, with `bm25_feedback_weight` of its weight against the query's own, and
    # searched again; 0: off. The defaults of the other two are Anserini's RM3's.
    bm25_feedback: int = 0
    bm25_feedback_terms: int = 10
    bm25_feedback_weight: float = 0.5
    # Enrichment's semantic pass: the least similarity, and how close to the best match
    # a hint must come; None leaves each agent's own (its profile).
    semantic_threshold: float | None = None
    semantic_margin: float | None = None

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any] | None) -> RankingSettings:
        """The settings a catalog's `ranking` holds, defaults for the rest (a name
        this code does not know, written by a later version, is left alone)."""
        names = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in (stored or {}).items() if name in names})

    def stored(self) -> dict[str, Any]:
        """What Catalog.ranking keeps: the settings that differ from the defaults."""
        default = asdict(RankingSettings())
        return {name: value for name, value in asdict(self).items() if value != default[name]}

    def changes(self, other: RankingSettings) -> dict[str, list[Any]]:
        """{setting: [this value, other's]} for each that differs."""
        mine, theirs = asdict(self), asdict(other)
        return {name: [mine[name], theirs[name]] for name in mine if mine[name] != theirs[name]}

    def with_values(self, values: Mapping[str, Any]) -> RankingSettings:
        return replace(self, **values)

    @property
    def weights(self) -> dict[str, float]:
        return {"bm25": self.bm25_weight, "vector": self.vector_weight}


def ranking_problems(values: Mapping[str, Any]) -> dict[str, str]:
    """{setting: why it cannot be used} for each of `values` that is unknown, of the
    wrong type or out of its range; {} when all can be."""
    names = {f.name for f in fields(RankingSettings)}
    problems: dict[str, str] = {}
    for name, value in values.items():
        if name not in names:
            problems[name] = f"Unknown setting; choose from {', '.join(sorted(names))}."
        elif name in CHOICES:
            if value not in CHOICES[name]:
                problems[name] = f"Choose one of {', '.join(CHOICES[name])}."
        elif value is None:
            if not name.startswith("semantic_"):
                problems[name] = "A value is required."
        elif isinstance(value, bool) or not isinstance(value, int | float) \
                or (name in WHOLE and not isinstance(value, int)):
            problems[name] = "A whole number is required." if name in WHOLE else "A number is required."
        elif not LIMITS[name][0] <= value <= LIMITS[name][1]:
            low, high = LIMITS[name]
            problems[name] = f"Must be between {low:g} and {high:g}."
    merged = RankingSettings.from_stored({n: v for n, v in values.items() if n in names and n not in problems})
    if "bm25_weight" not in problems and "vector_weight" not in problems \
            and merged.bm25_weight == 0 and merged.vector_weight == 0:
        problems["vector_weight"] = "At least one weight must be positive."
    return problems
