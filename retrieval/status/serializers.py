"""The status report's shapes (GET /api/v1/status), and the embeddings' state, which
the health check (config.health) reports too."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from retrieval.status.selectors import RECENT_FAILURES

FULL = "Present in the full view only (people with a role)."
SCOPED = ("Present in the full view (every catalog) and in the catalogs view (a curator agent: the catalogs it is "
          "scoped to).")


class EmbeddingsStatusSerializer(serializers.Serializer[dict[str, Any]]):
    mode = serializers.ChoiceField(choices=["hybrid", "lexical-only"])
    model = serializers.CharField(allow_null=True, help_text="The loaded model's id; null when none is.")
    reason = serializers.CharField(allow_null=True, help_text="Why no model is loaded; null when one is.")


class ModelSerializer(serializers.Serializer[dict[str, Any]]):
    configured = serializers.CharField(help_text="LECTERN_EMBEDDING_MODEL: default, none, or a model directory.")
    dimensions = serializers.IntegerField()
    max_tokens = serializers.IntegerField(allow_null=True, help_text="Tokens the model reads; null when none loaded.")
    threads = serializers.IntegerField()
    batch = serializers.IntegerField()


class ProcessSerializer(serializers.Serializer[dict[str, Any]]):
    pid = serializers.IntegerField(help_text="The process that answered (one of several web workers).")
    started_at = serializers.DateTimeField()
    applied_reset = serializers.IntegerField(
        allow_null=True, help_text="Audit seq of the newest reset this process has applied; null before it looked.")
    follows_resets_every_s = serializers.IntegerField(
        help_text="How often this process looks for a reset another process answered; 0: never.")
    cached_detection_indexes = serializers.IntegerField(help_text="Catalogs whose detection index it holds.")


class ResetRecordSerializer(serializers.Serializer[dict[str, Any]]):
    seq = serializers.IntegerField(help_text="Its audit log entry (action runtime.reset).")
    at = serializers.DateTimeField()
    by = serializers.CharField(help_text="The person's username or the agent's name.")


class ExtensionSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    version = serializers.CharField()


class DatabaseSerializer(serializers.Serializer[dict[str, Any]]):
    version = serializers.CharField(help_text="Postgres server_version.")
    name = serializers.CharField()
    size_bytes = serializers.IntegerField()
    ms = serializers.FloatField(help_text="How long the statement reading all this took.")
    extensions = ExtensionSerializer(many=True)
    data_directory = serializers.CharField(allow_null=True,
                                           help_text="Null when this database role may not read it.")
    role = serializers.CharField(help_text="The database role the app connects as.")
    role_can_disable_triggers = serializers.BooleanField(
        help_text="True when that role is a superuser or owns the audit log: it could disable the triggers that "
                  "keep the log append-only (set DATABASE_OWNER_URL; docs/subsystems/governance.md, Database roles).")


class FailureSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.CharField()
    name = serializers.CharField()
    func = serializers.CharField()
    stopped = serializers.DateTimeField()
    error = serializers.CharField(help_text="The last line of its traceback.")


class QueueSerializer(serializers.Serializer[dict[str, Any]]):
    waiting = serializers.IntegerField(help_text="Tasks queued, not yet taken by a worker.")
    in_progress = serializers.IntegerField(help_text="Tasks a worker has taken.")
    failed = serializers.IntegerField(help_text="Failed tasks kept (until deleted in the admin).")
    failed_24h = serializers.IntegerField()
    recent_failures = FailureSerializer(many=True, help_text=f"The newest {RECENT_FAILURES}.")


class IndexRunsSerializer(serializers.Serializer[dict[str, Any]]):
    queued = serializers.IntegerField()
    running = serializers.IntegerField()
    failed_24h = serializers.IntegerField()
    last_finished_at = serializers.DateTimeField(allow_null=True)


class LastTaskSerializer(serializers.Serializer[dict[str, Any]]):
    started = serializers.DateTimeField(allow_null=True)
    stopped = serializers.DateTimeField(allow_null=True)
    success = serializers.BooleanField(allow_null=True)
    result = serializers.CharField(allow_null=True, help_text="What it returned, or the last line of its error.")


class ScheduleSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    func = serializers.CharField()
    every = serializers.CharField()
    next_run = serializers.DateTimeField(allow_null=True)
    overdue_s = serializers.IntegerField(help_text="Seconds past next_run: a worker that runs keeps this near 0.")
    last = LastTaskSerializer(allow_null=True, help_text="Its newest task kept; null when none is.")


class LastScanSerializer(LastTaskSerializer):
    every = serializers.CharField()
    next_run = serializers.DateTimeField(allow_null=True)
    overdue_s = serializers.IntegerField()


class CatalogIndexSerializer(serializers.Serializer[dict[str, Any]]):
    slug = serializers.SlugField()
    name = serializers.CharField()
    sources = serializers.IntegerField()
    sources_not_ready = serializers.IntegerField(help_text="New, indexing or failed.")
    sources_lexical_only = serializers.IntegerField()
    documents = serializers.IntegerField()
    chunks = serializers.IntegerField()
    terms = serializers.IntegerField()
    last_indexed_at = serializers.DateTimeField(allow_null=True)


class StorageSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    relation = serializers.CharField()
    bytes = serializers.IntegerField(allow_null=True, help_text="Null when the relation does not exist.")


class DiskSerializer(serializers.Serializer[dict[str, Any]]):
    what = serializers.CharField()
    path = serializers.CharField()
    total_bytes = serializers.IntegerField()
    used_bytes = serializers.IntegerField()
    free_bytes = serializers.IntegerField()


class StatusSerializer(serializers.Serializer[dict[str, Any]]):
    view = serializers.ChoiceField(
        choices=["basic", "catalogs", "full"],
        help_text="basic: the embeddings alone; catalogs (a curator agent): the embeddings, the process (whether it "
                  "applied a reset) and its own catalogs' indexes and index runs, nothing of the server's database, "
                  "files, queue or schedules nor of other catalogs; full (people with a role): everything below.")
    embeddings = EmbeddingsStatusSerializer()
    generated_at = serializers.DateTimeField(required=False, help_text=SCOPED)
    model = ModelSerializer(required=False, help_text=FULL)
    process = ProcessSerializer(
        required=False, help_text="Present in the full view, and in the catalogs view with only the caller's catalogs' "
                                  "detection indexes counted.")
    last_reset = ResetRecordSerializer(required=False, allow_null=True, help_text=FULL)
    database = DatabaseSerializer(required=False, help_text=FULL)
    queue = QueueSerializer(required=False, help_text=FULL)
    index_runs = IndexRunsSerializer(required=False, help_text=SCOPED)
    schedules = ScheduleSerializer(many=True, required=False, help_text=FULL)
    last_scan = LastScanSerializer(required=False, allow_null=True,
                                   help_text=f"The scheduled scan's newest task. {FULL}")
    catalogs = CatalogIndexSerializer(many=True, required=False, help_text=SCOPED)
    storage = StorageSerializer(many=True, required=False, help_text=f"Index and table sizes. {FULL}")
    disk = DiskSerializer(many=True, required=False, help_text=FULL)

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        """The sections the report holds: the basic view has no full-view keys at all
        (not null ones)."""
        data: dict[str, Any] = super().to_representation(instance)
        return {key: value for key, value in data.items() if key in instance}
