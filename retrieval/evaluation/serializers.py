"""An evaluation run's shapes (POST /api/v1/evaluations and GET /api/v1/evaluations/{id}):
the run with its per-mode metrics and every two modes compared."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.ranking import MODES
from retrieval.evaluation.beir import METRICS
from retrieval.evaluation.comparison import Comparison
from retrieval.models import EvaluationRun


class ModeMetricsSerializer(serializers.Serializer[dict[str, Any]]):
    mode = serializers.ChoiceField(choices=MODES)
    queries = serializers.IntegerField()
    ndcg_at_10 = serializers.FloatField()
    recall_at_100 = serializers.FloatField()
    mrr_at_10 = serializers.FloatField()
    p50_ms = serializers.FloatField(help_text="Median search latency in the worker, milliseconds.")
    p95_ms = serializers.FloatField()


class DifferingQuerySerializer(serializers.Serializer[dict[str, Any]]):
    query_id = serializers.CharField()
    text = serializers.CharField()
    a = serializers.FloatField(help_text="Mode a's score on the metric.")
    b = serializers.FloatField()


class PairSerializer(serializers.Serializer[dict[str, Any]]):
    a = serializers.ChoiceField(choices=MODES)
    b = serializers.ChoiceField(choices=MODES)
    metric = serializers.ChoiceField(choices=METRICS)
    wins = serializers.IntegerField(help_text="Queries where a scored higher than b.")
    ties = serializers.IntegerField()
    losses = serializers.IntegerField(help_text="Queries where b scored higher than a.")
    win_rate = serializers.FloatField()
    tie_rate = serializers.FloatField()
    loss_rate = serializers.FloatField()
    mean_gain_a = serializers.FloatField(help_text="a's mean lead on the metric where a won; 0 if it never did.")
    mean_gain_b = serializers.FloatField(help_text="b's mean lead where b won.")
    differing = DifferingQuerySerializer(many=True, help_text="The queries where a and b differ most, largest first.")


PAIR_FIGURES = ("a", "b", "metric", "wins", "ties", "losses", "win_rate", "tie_rate", "loss_rate", "mean_gain_a",
                "mean_gain_b")


def pair_body(comparison: Comparison, texts: dict[str, str]) -> dict[str, Any]:
    """Two modes compared, as PairSerializer shows them (`texts`: query id -> its text)."""
    return {**{name: getattr(comparison, name) for name in PAIR_FIGURES},
            "differing": [{"query_id": d.query_id, "text": texts.get(d.query_id, ""), "a": d.a, "b": d.b}
                          for d in comparison.differing]}


class QuerySetNameSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField(help_text="Give it as `query_set` to run the same test set again.")
    name = serializers.CharField()


class EvaluationSerializer(serializers.ModelSerializer[EvaluationRun]):
    catalog: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    query_set = serializers.SerializerMethodField()
    modes = serializers.ListField(child=serializers.ChoiceField(choices=MODES))
    metrics = ModeMetricsSerializer(many=True, help_text="Per mode, in the order of modes; empty until it succeeded.")
    withheld = serializers.ListField(child=serializers.CharField(), help_text=(
        "Sources left out of every ranking: they need approval, which people are never granted."))
    stage = serializers.CharField(help_text="The mode being run; `done` once it succeeded.")
    ranking = serializers.DictField(allow_null=True, help_text=(
        "The catalog's ranking settings it ran with: those differing from the defaults ({}: the defaults; "
        "null: a run from before runs recorded them)."))
    pairwise = serializers.SerializerMethodField()
    page = serializers.SerializerMethodField()

    class Meta:
        model = EvaluationRun
        fields = ["id", "catalog", "query_set", "modes", "status", "stage", "progress", "queries_done",
                  "queries_total", "metrics", "pairwise", "withheld", "ranking", "judged_documents",
                  "missing_documents", "error", "created_by", "created_at", "started_at", "finished_at", "page"]
        read_only_fields = fields

    @extend_schema_field(QuerySetNameSerializer)
    def get_query_set(self, run: EvaluationRun) -> dict[str, Any]:
        return {"id": run.query_set_id, "name": run.query_set.name}

    @extend_schema_field(PairSerializer(many=True))
    def get_pairwise(self, run: EvaluationRun) -> list[dict[str, Any]]:
        """Every two modes compared, once the run succeeded (empty before)."""
        pairs: list[dict[str, Any]] = self.context.get("pairwise", [])
        return pairs

    @extend_schema_field(serializers.CharField(help_text="The run's page in the dashboard."))
    def get_page(self, run: EvaluationRun) -> str:
        return reverse("evaluations-run", args=[run.pk])
