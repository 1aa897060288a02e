"""POST /api/v1/tuning-runs, GET /api/v1/tuning-runs/{id} and POST
/api/v1/tuning-runs/{id}/apply: tune a catalog's ranking settings on one of its stored
test sets (the worker runs it), follow it, and apply its choice (refused, 409, unless
the held-out nDCG@10 gain is positive). Curators only, as evaluations are."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.auth import RequestUser, get_catalog_for_caller, request_user, visible_catalogs
from catalog.rest.fields import StrictIntegerField, StrictSlugField
from catalog.rest.schema import errors
from retrieval.evaluation.apis import CURATORS_ONLY, caller_name, require_curator
from retrieval.evaluation.selectors import query_sets_listed
from retrieval.evaluation.tuning import FOLDS
from retrieval.evaluation.tuning_runs import apply_problem, tuning_apply, tuning_request
from retrieval.models import TuningRun


class TuningRunSerializer(serializers.ModelSerializer[TuningRun]):
    catalog = serializers.SlugRelatedField(slug_field="slug", read_only=True)  # type: ignore[var-annotated]
    gain = serializers.FloatField(allow_null=True, help_text="Held-out nDCG@10 gain of the tuned settings over "
                                                             "the current ones; null until it succeeded.")
    applicable = serializers.SerializerMethodField(help_text="Why it may not be applied (null: it may).")

    class Meta:
        model = TuningRun
        fields = ["id", "catalog", "query_set", "kind", "proposal", "folds", "status", "stage", "progress", "current",
                  "chosen",
                  "report", "gain", "applicable", "error", "created_by", "created_at", "started_at", "finished_at",
                  "applied_at", "applied_by"]

    def get_applicable(self, run: TuningRun) -> str | None:
        return apply_problem(run)


def _run_for(caller: RequestUser, run_id: int) -> TuningRun:
    run = TuningRun.objects.select_related("catalog", "query_set") \
        .filter(pk=run_id, catalog__in=visible_catalogs(caller)).first()
    if run is None:
        raise Http404(f"No tuning run {run_id}.")
    return run


class TuningRunsApi(APIView):
    """Start a tuning run of a catalog's ranking settings on one of its stored test sets."""

    @extend_schema_serializer(component_name="StartTuning")
    class InputSerializer(serializers.Serializer[None]):
        catalog = StrictSlugField(max_length=64)
        query_set = StrictIntegerField(min_value=1, help_text="A stored test set of this catalog.")
        folds = StrictIntegerField(min_value=2, max_value=10, required=False, default=FOLDS,
                                   help_text="Cross-validation folds over the set's queries.")
        chunk_size = StrictIntegerField(min_value=100, max_value=20_000, required=False,
                                        help_text="Try this chunking instead of ranking settings: built on a "
                                                  "hidden shadow of the catalog and compared with it.")
        chunk_overlap = StrictIntegerField(min_value=0, max_value=10_000, required=False,
                                           help_text="With chunk_size; default: the catalog's.")

    @extend_schema(request=InputSerializer, operation_id="start_tuning", responses={
        202: TuningRunSerializer, **errors({
            400: "`invalid_input`: a field is missing or not valid (`details.fields` says which).",
            403: CURATORS_ONLY, 404: "`not_found`: no such catalog for this caller, or no such test set of it."})})
    def post(self, request: Request) -> Response:
        caller = request_user(request)
        require_curator(caller)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values: dict[str, Any] = data.validated_data
        catalog = get_catalog_for_caller(caller, values["catalog"])
        query_set = query_sets_listed().filter(pk=values["query_set"], catalog=catalog).first()
        if query_set is None:
            raise Http404(f"No test set {values['query_set']} in catalog {catalog.slug}.")
        try:
            chunking = None if "chunk_size" not in values and "chunk_overlap" not in values else {
                "chunk_size": values.get("chunk_size", catalog.chunk_size),
                "chunk_overlap": values.get("chunk_overlap", catalog.chunk_overlap)}
            run = tuning_request(catalog=catalog, query_set=query_set, folds=values["folds"], by=caller_name(caller),
                                 chunking=chunking)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.message_dict) from None
        return Response(TuningRunSerializer(_run_for(caller, run.pk)).data, status=status.HTTP_202_ACCEPTED)


class TuningRunApi(APIView):
    """One tuning run: progress while the worker has it; then the held-out figures per
    metric, each fold's choice, the queries won and lost, and the settings chosen."""

    @extend_schema(operation_id="get_tuning", responses={200: TuningRunSerializer, **errors({
        403: CURATORS_ONLY, 404: "`not_found`: no such run in a catalog this caller may see."})})
    def get(self, request: Request, pk: int) -> Response:
        caller = request_user(request)
        require_curator(caller)
        return Response(TuningRunSerializer(_run_for(caller, pk)).data)


class TuningApplyApi(APIView):
    """Apply a tuning run's chosen settings to its catalog (audited with the run)."""

    @extend_schema(request=None, operation_id="apply_tuning", responses={200: TuningRunSerializer, **errors({
        403: CURATORS_ONLY, 404: "`not_found`: no such run in a catalog this caller may see.",
        409: "`tuning_not_applicable`: it has not succeeded, was applied already, its held-out nDCG@10 gain is "
             "not positive, or the catalog's settings changed since it tuned from them (the message says which)."})})
    def post(self, request: Request, pk: int) -> Response:
        caller = request_user(request)
        require_curator(caller)
        run = _run_for(caller, pk)
        tuning_apply(run=run, by=caller)
        return Response(TuningRunSerializer(_run_for(caller, pk)).data)
