"""POST /api/v1/evaluations and GET /api/v1/evaluations/{id} (the
run done by the worker): start a run of a catalog's search modes on a stored test set or on
one uploaded in the body, then follow it: progress, per-mode metrics and latency, and
wins, ties and losses between every two modes.

Curators only: people in the curator group and curator agents (a curator agent within
its own catalogs). Whoever asks, ranking is a signed-in person's search: sources that
need approval are left out and named (retrieval.evaluation.ranking)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import RequestUser, get_catalog_for_caller, is_curator, request_user
from catalog.errors import InvalidError
from catalog.models import Agent, Catalog
from catalog.rest.fields import StrictCharField, StrictIntegerField, StrictSlugField
from catalog.rest.schema import errors
from retrieval.evaluation.beir import METRICS
from retrieval.evaluation.comparison import Comparison
from retrieval.evaluation.query_sets import query_set_create
from retrieval.evaluation.runs import DEFAULT_MODES, evaluation_request, modes_problem
from retrieval.evaluation.selectors import query_sets_listed, run_comparisons, run_for
from retrieval.models import EvaluationRun, EvaluationSet
from retrieval.search.selectors import MODES

CURATORS_ONLY = "`forbidden`: the caller is not a curator (a reader token, or a session outside the curator group)."


def _require_curator(caller: RequestUser) -> None:
    if not is_curator(caller):
        raise PermissionDenied("Evaluations need a curator token or a curator's session.")


def caller_name(caller: RequestUser) -> str:
    """Who asked, as a run or a test set records it."""
    if isinstance(caller, Agent):
        return f"{caller.name} (agent)"
    return caller.get_username()


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


def _pair(comparison: Comparison, texts: dict[str, str]) -> dict[str, Any]:
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
    pairwise = serializers.SerializerMethodField()
    page = serializers.SerializerMethodField()

    class Meta:
        model = EvaluationRun
        fields = ["id", "catalog", "query_set", "modes", "status", "stage", "progress", "queries_done",
                  "queries_total", "metrics", "pairwise", "withheld", "judged_documents", "missing_documents",
                  "error", "created_by", "created_at", "started_at", "finished_at", "page"]
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


class EvaluationsApi(APIView):
    """Start an evaluation run: a catalog, the modes, and a test set, stored (`query_set`)
    or uploaded here (`name`, `queries`, `qrels`: kept under that name for later runs of
    the catalog; a set runs only on the catalog it was uploaded for).
    The worker runs it; follow it at GET /api/v1/evaluations/{id}."""

    @extend_schema_serializer(component_name="StartEvaluation")
    class InputSerializer(serializers.Serializer[None]):
        catalog = StrictSlugField(max_length=64)
        modes = serializers.ListField(child=serializers.ChoiceField(choices=MODES), required=False,
                                      default=list(DEFAULT_MODES), max_length=len(MODES),
                                      help_text="Each once; run in the order search lists them.")
        query_set = StrictIntegerField(required=False, min_value=1,
                                       help_text="A stored test set's id: one uploaded for this catalog.")
        name = StrictCharField(required=False, max_length=100, help_text="Name of the test set uploaded here.")
        queries = StrictCharField(required=False, trim_whitespace=False,
                                  help_text="BEIR queries.jsonl: one {\"_id\", \"text\"} per line.")
        qrels = StrictCharField(required=False, trim_whitespace=False,
                                help_text="BEIR qrels TSV: query-id, corpus-id, score per line (header optional).")

        def validate_modes(self, value: list[str]) -> list[str]:
            if problem := modes_problem(value):
                raise serializers.ValidationError(problem)
            return value

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            uploaded = [name for name in ("name", "queries", "qrels") if name in attrs]
            if "query_set" in attrs and uploaded:
                raise serializers.ValidationError("Give either `query_set` or a test set to upload, not both.")
            if "query_set" not in attrs and len(uploaded) < 3:
                missing = [name for name in ("name", "queries", "qrels") if name not in attrs]
                raise serializers.ValidationError(
                    {name: ["Required to upload a test set (or give `query_set`)."] for name in missing})
            return attrs

    @extend_schema(request=InputSerializer, operation_id="start_evaluation", responses={
        202: EvaluationSerializer, **errors({
            400: "`invalid_input`: a field is missing or not valid (`details.fields` says which); "
                 "`invalid_test_set`: the uploaded test set is refused, `details.fields.queries` / `qrels` / `name` "
                 "say why, by line. Nothing is stored.",
            403: CURATORS_ONLY,
            404: "`not_found`: no such catalog for this caller, or no such test set of that catalog."})})
    def post(self, request: Request) -> Response:
        caller = request_user(request)
        _require_curator(caller)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        catalog = get_catalog_for_caller(caller, values["catalog"])
        try:
            with transaction.atomic():  # an uploaded set is kept only with the run it was sent for
                query_set = self._query_set(values, caller, catalog)
                run = evaluation_request(catalog=catalog, query_set=query_set, modes=values["modes"],
                                         by=caller_name(caller))
        except DjangoValidationError as error:  # what the files hold, or a name taken: not the body's shape
            raise InvalidError("The test set is refused; see details.", code="invalid_test_set",
                              details={"fields": error.message_dict}) from None
        run = run_for(caller, run.pk)  # as the worker left it (a synchronous queue has run it already)
        return Response(EvaluationSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    def _query_set(self, values: dict[str, Any], caller: RequestUser, catalog: Catalog) -> EvaluationSet:
        """The stored set named, found only among the catalog's own (the caller may read
        the catalog: get_catalog_for_caller), else 404 as for a set that does not exist;
        or the set uploaded here, for this catalog."""
        if "query_set" in values:
            found = query_sets_listed().filter(pk=values["query_set"], catalog=catalog).first()
            if found is None:
                raise Http404(f"No test set {values['query_set']} in catalog {catalog.slug}.")
            return found
        return query_set_create(catalog=catalog, name=values["name"], queries=values["queries"],
                                qrels=values["qrels"], by=caller_name(caller))


class EvaluationApi(APIView):
    """One evaluation run: status and progress while the worker runs it; once it
    succeeded, per-mode metrics and latency and, for every two modes, wins, ties and
    losses on `metric` with the queries where they differ most."""

    class QuerySerializer(serializers.Serializer[None]):
        metric = serializers.ChoiceField(choices=METRICS, required=False, default="ndcg_at_10",
                                         help_text="What wins, ties and losses compare.")

    @extend_schema(parameters=[QuerySerializer], operation_id="get_evaluation", responses={
        200: EvaluationSerializer, **errors({
            400: "`invalid_input`: `metric` is not one of the metrics.", 403: CURATORS_ONLY,
            404: "`not_found`: no such run in a catalog this caller may see."})})
    def get(self, request: Request, pk: int) -> Response:
        caller = request_user(request)
        _require_curator(caller)
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        run = run_for(caller, pk)
        pairwise = []
        if run.status == EvaluationRun.Status.SUCCEEDED:
            comparisons, texts = run_comparisons(run, metric=query.validated_data["metric"])
            pairwise = [_pair(comparison, texts) for comparison in comparisons]
        return Response(EvaluationSerializer(run, context={"pairwise": pairwise}).data)
