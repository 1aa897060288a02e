"""The webhook channel's endpoints: the signed decision coming back (no session, no
token: the signature is the only credential), and curators' endpoint management and
delivery history for a catalog."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.channels.models import EventType, WebhookDelivery, WebhookEndpoint
from approvals.channels.webhooks.endpoints import endpoint_create
from approvals.channels.webhooks.inbound import decision_admit, decision_receive
from approvals.models import COMMENT_MAX_CHARS, Decision
from catalog.auth import get_catalog_for_caller, is_curator, request_user
from catalog.models import Catalog
from catalog.rest.fields import StrictBooleanField, StrictCharField
from catalog.rest.schema import LecternAutoSchema, errors


class SignedSchema(LecternAutoSchema):
    def _framework_errors(self, *, has_body: bool) -> dict[int, str]:
        found = super()._framework_errors(has_body=has_body)
        found.pop(403, None)  # no session is read here, so no CSRF check either
        return found


SIGNATURE_HEADERS = [
    OpenApiParameter("webhook-id", str, OpenApiParameter.HEADER, required=True,
                     description="The message's unique id, taken once: once a message signed under it has "
                                 "arrived, accepted or refused, another with the same id is refused (409)."),
    OpenApiParameter("webhook-timestamp", str, OpenApiParameter.HEADER, required=True,
                     description="Seconds since the epoch; refused when more than 5 minutes from the server's clock."),
    OpenApiParameter("webhook-signature", str, OpenApiParameter.HEADER, required=True,
                     description="`v1,<base64 HMAC-SHA256 of \"{id}.{timestamp}.{body}\">` with the secret of an "
                                 "active endpoint of the request's catalog that accepts decisions (space-separated "
                                 "when several)."),
]


def _client(request: Request) -> str:
    return str(request.META.get("REMOTE_ADDR", ""))


class SignedDecisionApi(APIView):
    """Decide an approval request from an external system, signed as Standard Webhooks
    sign (docs/api.md, "Signed decisions"). The signed body names the request and the
    content it decides (the URL is not signed). The decision goes through the same
    service as the web queue's: the reviewer named must be a Lectern user in the
    reviewer group, and four eyes, self-approval, required approvals and conflicts apply."""

    authentication_classes = []
    permission_classes = []
    schema = SignedSchema()

    @extend_schema_serializer(component_name="SignedDecision")
    class InputSerializer(serializers.Serializer[None]):
        request_id = serializers.IntegerField(min_value=1, max_value=2**63 - 1,
                                              help_text="The request decided: the id in the URL.")
        fingerprint = StrictCharField(max_length=64, help_text="The content decided: the request's `fingerprint` "
                                                               "(from its approval.requested event).")
        verdict = serializers.ChoiceField(choices=Decision.Verdict.values)
        reviewer = StrictCharField(max_length=150, help_text="The username of a Lectern user in the reviewer group.")
        comment = StrictCharField(max_length=COMMENT_MAX_CHARS, required=False, default="", allow_blank=True,
                                  trim_whitespace=False)

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        request_id = serializers.IntegerField()
        state = serializers.ChoiceField(choices=["pending", "approved", "rejected"],
                                        help_text="pending: more approvals are still required.")
        approvals = serializers.IntegerField(min_value=0, help_text="Distinct reviewers who approved it so far.")

    @extend_schema(
        operation_id="decide_approval_signed", auth=[], request=InputSerializer, parameters=SIGNATURE_HEADERS,
        responses={200: OutputSerializer, **errors({
            400: "`invalid_input`: a field is missing or not valid, or no active user has the reviewer's name; "
                 "`request_mismatch`: the body names another request than the URL.",
            401: "`missing_signature`, `stale_timestamp` (more than 5 minutes off) or `bad_signature`.",
            403: "`not_reviewer`: the user named is not in the reviewer group; `four_eyes`: they last changed the "
                 "source or a policy covering it; `self_approval`: their change raised the request.",
            404: "`not_found`: no such approval request.",
            409: "`replayed`: a message with this webhook-id arrived already; `fingerprint_mismatch`: the body "
                 "decides other content than the request's; `request_decided`, `already_decided`, "
                 "`content_changed`: see docs/api.md.",
        })})
    def post(self, request: Request, pk: int) -> Response:
        body = request.body  # read first: the signature covers these bytes, parsed only once verified
        verified = decision_admit(request_id=pk, headers=request.headers, body=body, client=_client(request))
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        decided = decision_receive(request_id=pk, verified=verified, names_request=fields.pop("request_id"),
                                   **fields)
        return Response(self.OutputSerializer({"request_id": decided.pk, "state": decided.state,
                                               "approvals": decided.approvals}).data)


def _curated_catalog(request: Request, slug: str) -> tuple[Catalog, User]:
    caller = request_user(request)
    catalog = get_catalog_for_caller(caller, slug)
    if not isinstance(caller, User) or not is_curator(caller):
        raise PermissionDenied("Webhook endpoints are managed by a person in the curator group.")
    return catalog, caller


class WebhookEndpointSerializer(serializers.ModelSerializer[WebhookEndpoint]):
    catalog: serializers.SlugRelatedField[Catalog] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    event_types = serializers.ListField(child=serializers.ChoiceField(choices=EventType.values))

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "catalog", "url", "description", "event_types", "active", "accepts_decisions", "secret_hint",
                  "created_at"]
        read_only_fields = fields


CURATOR_ERRORS = {403: "`forbidden`: the caller is not a person in the curator group.",
                  404: "`not_found`: no such catalog for this caller."}


@extend_schema_field({"type": "string", "format": "uri", "pattern": "^https?://", "maxLength": 2000})
class EndpointUrlField(serializers.URLField):
    """An endpoint's URL: http or https only (the model's rule), as the schema says."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=2000, **kwargs)
        self.validators.append(URLValidator(schemes=["http", "https"]))


class WebhookEndpointsApi(APIView):
    """A catalog's webhook endpoints (GET), or a new one (POST), whose secret the answer
    holds this once."""

    @extend_schema_serializer(component_name="NewWebhookEndpoint")
    class InputSerializer(serializers.Serializer[None]):
        url = EndpointUrlField()
        description = StrictCharField(max_length=200, required=False, default="", allow_blank=True)
        event_types = serializers.ListField(child=serializers.ChoiceField(choices=EventType.values), required=False,
                                            min_length=1, help_text="Default: every event type.")
        accepts_decisions = StrictBooleanField(required=False, default=True)

    class OutputSerializer(WebhookEndpointSerializer):
        secret = serializers.CharField(read_only=True, help_text="Shown this once: keep it to verify signatures.")

        class Meta(WebhookEndpointSerializer.Meta):
            fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]
            read_only_fields = fields

    @extend_schema(operation_id="list_webhook_endpoints",
                   responses={200: WebhookEndpointSerializer(many=True), **errors(CURATOR_ERRORS)})
    def get(self, request: Request, slug: str) -> Response:
        catalog, _ = _curated_catalog(request, slug)
        endpoints = WebhookEndpoint.objects.filter(catalog=catalog).select_related("catalog")
        return Response(WebhookEndpointSerializer(endpoints, many=True).data)

    @extend_schema(operation_id="create_webhook_endpoint", request=InputSerializer,
                   responses={201: OutputSerializer, **errors({
                       400: "`invalid_input`: a field is missing or not valid.", **CURATOR_ERRORS})})
    def post(self, request: Request, slug: str) -> Response:
        catalog, curator = _curated_catalog(request, slug)  # who asks first: a non-curator learns nothing more
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            issued = endpoint_create(catalog=catalog, by=curator, **data.validated_data)
        except ValidationError as exc:  # the model's own checks, should the serializer's ever differ
            raise serializers.ValidationError(exc.message_dict) from None
        body = {**WebhookEndpointSerializer(issued.endpoint).data, "secret": issued.secret}
        return Response(body, status=status.HTTP_201_CREATED)


class DeliveryAttemptSerializer(serializers.Serializer[dict[str, Any]]):
    attempt = serializers.IntegerField(min_value=1)
    at = serializers.DateTimeField()
    status_code = serializers.IntegerField(allow_null=True, help_text="null: no answer (see error).")
    error = serializers.CharField(help_text="Empty when the endpoint answered 2xx.")
    ms = serializers.IntegerField(min_value=0)


class WebhookDeliveriesApi(APIView):
    """A catalog's webhook deliveries, newest first: each attempt's status code, error
    and timing, and when the next is due."""

    class QuerySerializer(serializers.Serializer[None]):
        status = serializers.ChoiceField(choices=WebhookDelivery.Status.values, required=False)
        limit = serializers.IntegerField(min_value=1, max_value=500, required=False, default=100)

    class OutputSerializer(serializers.ModelSerializer[WebhookDelivery]):
        event_type = serializers.CharField(source="event.type")
        message_id = serializers.CharField(source="event.message_id")
        request_id = serializers.IntegerField(source="event.request_id")
        url = serializers.CharField(source="endpoint.url")
        history = DeliveryAttemptSerializer(many=True)

        class Meta:
            model = WebhookDelivery
            fields = ["id", "event_type", "message_id", "request_id", "endpoint", "url", "status", "attempts",
                      "last_status_code", "last_error", "last_response", "next_attempt_at", "delivered_at",
                      "created_at", "history"]
            read_only_fields = fields

    @extend_schema(operation_id="list_webhook_deliveries", parameters=[QuerySerializer],
                   responses={200: OutputSerializer(many=True), **errors({
                       400: "`invalid_input`: a query parameter is not valid.", **CURATOR_ERRORS})})
    def get(self, request: Request, slug: str) -> Response:
        catalog, _ = _curated_catalog(request, slug)
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        deliveries = WebhookDelivery.objects.filter(endpoint__catalog=catalog).select_related("event", "endpoint")
        if "status" in query.validated_data:
            deliveries = deliveries.filter(status=query.validated_data["status"])
        page = deliveries.order_by("-pk")[: query.validated_data["limit"]]
        return Response(self.OutputSerializer(page, many=True).data)
