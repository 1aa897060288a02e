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
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import RequestUser, get_catalog_for_caller, is_curator, request_user
from catalog.errors import InvalidError
from catalog.models import Agent, Catalog
from catalog.ranking import MODES
from catalog.rest.fields import StrictCharField, StrictIntegerField, StrictSlugField
from catalog.rest.schema import errors
from retrieval.evaluation.beir import METRICS
from retrieval.evaluation.query_sets import query_set_create
from retrieval.evaluation.runs import DEFAULT_MODES, evaluation_request, modes_problem
from retrieval.evaluation.selectors import query_sets_listed, run_comparisons, run_for
from retrieval.evaluation.serializers import EvaluationSerializer, pair_body
from retrieval.models import EvaluationRun, EvaluationSet

CURATORS_ONLY = "`forbidden`: the caller is not a curator (a reader token, or a session outside the curator group)."


def require_curator(caller: RequestUser) -> None:
    if not is_curator(caller):
        raise PermissionDenied("Evaluations need a curator token or a curator's session.")


def caller_name(caller: RequestUser) -> str:
    """Who asked, as a run or a test set records it."""
    if isinstance(caller, Agent):
        return f"{caller.name} (agent)"
    return caller.get_username()


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
        require_curator(caller)
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
        require_curator(caller)
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        run = run_for(caller, pk)
        pairwise = []
        if run.status == EvaluationRun.Status.SUCCEEDED:
            comparisons, texts = run_comparisons(run, metric=query.validated_data["metric"])
            pairwise = [pair_body(comparison, texts) for comparison in comparisons]
        return Response(EvaluationSerializer(run, context={"pairwise": pairwise}).data)
