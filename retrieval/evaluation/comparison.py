"""Two modes compared query by query (win rates); pure Python.

For each query both modes answered, mode `a` wins when its score on the metric is
higher than `b`'s, loses when lower, and ties when the two are equal (within a
rounding tolerance: the metrics are sums of logarithms). Beside the counts: how much
the winner was ahead on average where it won ("average improvement when
enhanced wins", as a difference of the metric: a ratio has no meaning where the loser
scored 0), and the queries where the two differ most, which is where a curator looks
to see why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

TOLERANCE = 1e-9


@dataclass(frozen=True)
class QueryDifference:
    query_id: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.a - self.b


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    metric: str
    wins: int  # queries where a scored higher
    ties: int
    losses: int  # queries where b scored higher
    mean_gain_a: float  # a's mean lead where a won (0 when it never did)
    mean_gain_b: float  # b's mean lead where b won
    differing: list[QueryDifference]  # largest |a - b| first, ties left out

    @property
    def queries(self) -> int:
        return self.wins + self.ties + self.losses

    def rate(self, count: int) -> float:
        return count / self.queries if self.queries else 0.0

    @property
    def win_rate(self) -> float:
        return self.rate(self.wins)

    @property
    def tie_rate(self) -> float:
        return self.rate(self.ties)

    @property
    def loss_rate(self) -> float:
        return self.rate(self.losses)


def compare(a_scores: Mapping[str, float], b_scores: Mapping[str, float], *, a: str, b: str, metric: str,
            shown: int = 10) -> Comparison:
    """`a` against `b` over the queries both scored; `shown` of the most differing."""
    differences = [QueryDifference(query_id, a_scores[query_id], b_scores[query_id])
                   for query_id in a_scores if query_id in b_scores]
    ahead = [d.delta for d in differences if d.delta > TOLERANCE]
    behind = [-d.delta for d in differences if d.delta < -TOLERANCE]
    differing = sorted((d for d in differences if abs(d.delta) > TOLERANCE),
                       key=lambda d: (-abs(d.delta), d.query_id))[:shown]
    return Comparison(a=a, b=b, metric=metric, wins=len(ahead), ties=len(differences) - len(ahead) - len(behind),
                      losses=len(behind), mean_gain_a=sum(ahead) / len(ahead) if ahead else 0.0,
                      mean_gain_b=sum(behind) / len(behind) if behind else 0.0, differing=differing)
