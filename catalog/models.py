"""Catalogs of reference sources, their documents, chunks, embeddings and postings, and
the agents that read them (which catalogs each may read, and its profile)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from pgvector.django import VectorField

from catalog.embedder import DEFAULT_MODEL_ID, DIMENSIONS
from catalog.ranking import RankingSettings
from catalog.sources.locators import cite
from catalog.tag_keys import tag_key


class CatalogQuerySet(models.QuerySet["Catalog"]):
    def live(self) -> CatalogQuerySet:
        """Every catalog but the shadows tuning runs build (Catalog.shadow_of)."""
        return self.filter(shadow_of=None)


class Catalog(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    chunk_size = models.PositiveIntegerField(
        default=1000, validators=[MinValueValidator(100), MaxValueValidator(20_000)],
        help_text="Characters per chunk; 1000 keeps all-MiniLM-L6-v2 (256 tokens) reading chunks whole.",
    )
    chunk_overlap = models.PositiveIntegerField(default=100, validators=[MaxValueValidator(10_000)])
    embedding_model = models.CharField(max_length=100, default=DEFAULT_MODEL_ID)
    # BM25 corpus statistics over current chunks, kept exact by every index write.
    chunk_count = models.BigIntegerField(default=0)
    token_total = models.BigIntegerField(default=0)
    term_count = models.IntegerField(default=0)
    idf_sum = models.FloatField(default=0.0)
    ranking = models.JSONField(
        default=dict, blank=True,
        help_text="Its ranking settings that differ from the defaults (catalog.ranking.RankingSettings).")
    # A shadow: a hidden copy of another catalog's readable documents cut another way,
    # built and evaluated by a tuning run before a chunking change goes live, then
    # dropped. No listing, agent or search request ever sees one (catalog.auth).
    shadow_of = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="shadows",
                                  editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        if self.chunk_overlap >= self.chunk_size:
            raise ValidationError({"chunk_overlap": "Overlap must be smaller than the chunk size."})

    @property
    def ranking_settings(self) -> RankingSettings:
        return RankingSettings.from_stored(self.ranking)

    @property
    def average_idf(self) -> float:
        return self.idf_sum / self.term_count if self.term_count else 0.0

    @property
    def average_length(self) -> float:
        return self.token_total / self.chunk_count if self.chunk_count else 0.0


class Tag(models.Model):
    name = models.CharField(max_length=100)
    key = models.CharField(max_length=100, unique=True, editable=False)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        self.key = tag_key(self.name)
        if not self.key:
            raise ValidationError({"name": "A tag needs at least one letter or digit."})


# A web source's crawl: how deep it may go and how many pages it may request at most.
MAX_CRAWL_DEPTH = 10
MAX_CRAWL_PAGES = 10_000


class ReferenceSource(models.Model):
    class Mode(models.TextChoices):
        AUTO = "auto", "auto (always offered)"
        SELECTABLE = "selectable", "selectable (on request or detection)"
        PRESELECTED = "preselected", "preselected (pinned for agents)"

    class Kind(models.TextChoices):
        GLOB = "glob", "files matching a glob under a source root"
        UPLOAD = "upload", "uploaded files"
        INLINE = "inline", "inline text"
        GIT = "git", "git repository"
        WEB = "web", "web site"

    class Status(models.TextChoices):
        NEW = "new"
        INDEXING = "indexing"
        READY = "ready"
        LEXICAL_ONLY = "lexical_only", "ready (lexical only: no embedding model)"
        ERROR = "error"

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="sources")
    slug = models.SlugField(max_length=100, help_text="The reference id, unique within the catalog.")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.SELECTABLE)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.GLOB)
    location = models.CharField(
        max_length=1024, blank=True,
        help_text="Glob relative to a source root (or absolute inside one); file name for uploads.",
    )
    content = models.TextField(blank=True, help_text="The text of an inline source.")
    ref = models.CharField(max_length=255, blank=True,
                           help_text="A git source's branch, tag or commit; blank: the remote's default branch.")
    include = models.TextField(blank=True, help_text="Globs of the files a git source indexes (of the URL paths a "
                                                     "web source crawls), one per line (** matches folders); "
                                                     "blank: every file Lectern reads.")
    exclude = models.TextField(blank=True, help_text="Globs of the files a git source leaves out (of the URL paths "
                                                     "a web source does not crawl), one per line.")
    max_depth = models.PositiveSmallIntegerField(
        default=3, validators=[MaxValueValidator(MAX_CRAWL_DEPTH)],
        help_text="How many links from its start page a web source's crawl follows (0: the start page alone).")
    max_pages = models.PositiveIntegerField(
        default=200, validators=[MinValueValidator(1), MaxValueValidator(MAX_CRAWL_PAGES)],
        help_text="The most pages a web source's crawl requests.")
    secret_sealed = models.TextField(
        blank=True, help_text="A git source's https token or ssh deploy key, sealed (catalog.sealing); never shown.")
    secret_hint = models.CharField(max_length=16, blank=True, help_text="The secret's last characters, to tell it.")
    sync = models.JSONField(
        default=dict, blank=True,
        help_text="What its last sync found (git: the commit, files read and skipped), for the source page.")
    tags = models.ManyToManyField(Tag, blank=True, related_name="sources")
    requires_approval = models.BooleanField(
        default=False, help_text="Agents need a reviewer's approval to read it (as a source policy for every agent).")
    fingerprint = models.CharField(max_length=64, blank=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Who last changed its content or settings (none: a command, a scan, an agent). "
                  "Under four eyes they may not approve it.")
    content_edits = models.PositiveBigIntegerField(
        default=0, help_text="How many times its content was changed: a reindex reads it with the content, so it "
                             "knows whose edits it switches in (ContentEditor).")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.NEW)
    last_error = models.TextField(blank=True)
    indexed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["catalog", "slug"]
        constraints = [models.UniqueConstraint(fields=["catalog", "slug"], name="source_slug_unique_per_catalog")]
        # Every enrich call checks its catalogs' detection stamp (count, latest
        # updated_at and indexed_at): an index-only scan instead of reading wide rows.
        indexes = [models.Index(fields=["catalog"], include=["updated_at", "indexed_at"],
                                name="source_detection_stamp"),
                   # The approval gate reads a catalog's sources before every search: what
                   # it needs of each, from the index alone; and while no policy applies,
                   # only the flagged ones (usually none).
                   models.Index(fields=["catalog"], include=["id", "fingerprint", "requires_approval"],
                                name="source_gate"),
                   models.Index(fields=["catalog"], condition=models.Q(requires_approval=True),
                                name="source_flagged")]

    def __str__(self) -> str:
        return f"{self.catalog.slug}/{self.slug}"

    def clean(self) -> None:
        if self.kind == self.Kind.GLOB and not self.location:
            raise ValidationError({"location": "A glob source needs a glob pattern."})
        if self.kind == self.Kind.INLINE and not self.content.strip():  # whitespace would index as nothing
            raise ValidationError({"content": "An inline source needs its text."})
        if self.kind == self.Kind.GIT and not self.location:
            raise ValidationError({"location": "A git source needs its repository's URL or path."})
        if self.kind == self.Kind.WEB and not self.location:
            raise ValidationError({"location": "A web source needs its start URL (a page, or a sitemap .xml)."})


class ContentEditor(models.Model):
    """A person answerable for a source's content, whom self-approval and four eyes keep
    from deciding on it: `pending`, they changed it since the content served now was
    read (`edit`: the source's content_edits after their last change); served, the
    content served now came from their edits (until a reindex switches in other
    content). Only a person's edit adds one; none but that switch removes one."""

    source = models.ForeignKey(ReferenceSource, on_delete=models.CASCADE, related_name="content_editors")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    pending = models.BooleanField(help_text="Their edit is not in the content served yet.")
    edit = models.PositiveBigIntegerField(help_text="The source's content_edits after their last change.")

    class Meta:
        ordering = ["source", "user"]
        constraints = [models.UniqueConstraint(fields=["source", "user", "pending"], name="content_editor_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} on {self.source_id} ({'pending' if self.pending else 'served'})"


class UploadedFile(models.Model):
    """The content of record of an upload source: what curators uploaded or imported.

    Documents (and their chunks) are derived from these by indexing, so an edit here
    moves the source's fingerprint and the next scan reindexes just what changed.
    """

    source = models.ForeignKey(ReferenceSource, on_delete=models.CASCADE, related_name="uploads")
    path = models.CharField(max_length=1024, help_text="File name or external id.")
    title = models.CharField(max_length=500, blank=True)
    text = models.TextField()
    sha256 = models.CharField(max_length=64)
    size = models.BigIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["source", "path"]
        constraints = [models.UniqueConstraint(fields=["source", "path"], name="upload_path_unique_per_source")]

    def __str__(self) -> str:
        return self.path


class Document(models.Model):
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    source = models.ForeignKey(ReferenceSource, on_delete=models.CASCADE, related_name="documents")
    path = models.CharField(max_length=1024, help_text="Path under the source root, or an external id.")
    title = models.CharField(max_length=500, blank=True)
    text = models.TextField()
    content_sha256 = models.CharField(max_length=64)
    size = models.BigIntegerField()
    mtime = models.FloatField(null=True, blank=True)
    locator = models.JSONField(
        default=dict, blank=True,
        help_text="Where it was read from, for citations (catalog.sources.locators): its format, and a git file's "
                  "commit and web link or a web page's URL.")
    chunking = models.CharField(
        max_length=200, blank=True,
        help_text="How its chunks were cut (catalog.indexing.chunks.chunking_stamp): chunker version, size/overlap "
                  "and model. A run rebuilds a document whose stamp is not its catalog's now; blank: cut before "
                  "stamps were kept.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["source", "path"]
        constraints = [models.UniqueConstraint(fields=["source", "path"], name="document_path_unique_per_source")]

    def __str__(self) -> str:
        return self.path


class Chunk(models.Model):
    """A slice of a document, with what BM25 and the vector search read of it.

    The table is partitioned by catalog (migration 0017): each catalog's chunks and
    forward postings are partitions of their own (catalog_chunk_c<id>, ...), made
    and dropped with the catalog row by triggers, and each has its own HNSW index
    (catalog_chunk_c<id>_hnsw), so one catalog's search never walks another's rows. The
    primary key is (catalog_id, id) in the database, the catalog leading every key;
    Django knows `id` alone, which stays unique (one identity sequence). Every query
    that knows its catalog names it, so Postgres reads that catalog's partition only.
    """

    key = models.CharField(max_length=1200, help_text="catalog:source:path:byte_offset")
    # No database constraint or index: the partition is the catalog's and goes with it.
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, db_constraint=False, db_index=False,
                                related_name="+")
    source = models.ForeignKey(ReferenceSource, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.PositiveIntegerField()
    byte_offset = models.BigIntegerField()
    content = models.TextField(help_text="The exact slice of the document text at byte_offset.")
    heading = models.CharField(
        max_length=300, blank=True,
        help_text="The document title, indexed with a chunk that does not itself contain it.",
    )
    token_count = models.PositiveIntegerField(help_text="Embedding-model tokens of the indexed text.")
    locator = models.JSONField(
        default=dict, blank=True,
        help_text="Where it sits, for citations: its document's locator and its lines, pages or slides and heading "
                  "path (catalog.sources.locators); empty: cut before chunks were located.")
    embedding = VectorField(dimensions=DIMENSIONS, null=True, blank=True)

    class Meta:
        ordering = ["document", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["catalog", "key"], name="chunk_key_unique_per_catalog")]

    def __str__(self) -> str:
        return self.key

    @property
    def indexed_text(self) -> str:
        """What BM25 and the embedding see: the heading (if any), then the content."""
        return indexed_text(self.heading, self.content)

    @property
    def citation(self) -> str:
        """Where it sits, as one line (catalog.sources.locators.cite)."""
        return cite(self.locator, self.document.path)


def indexed_text(heading: str, content: str) -> str:
    return f"{heading}\n{content}" if heading else content


class Term(models.Model):
    """A catalog's vocabulary entry with its document (chunk) frequency."""

    id = models.AutoField(primary_key=True)  # int4: postings arrays hold these ids
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    text = models.CharField(max_length=64)
    df = models.IntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "text"], name="term_unique_per_catalog")]

    def __str__(self) -> str:
        return self.text


class Postings(models.Model):
    """A chunk's forward index: its BM25 length, term ids and their frequencies.

    One narrow row per chunk. It holds N and the total length for the catalog
    statistics, the term ids that the write path needs to release a removed chunk's
    document frequencies and to find its BM25 blocks, and the postings the blocks are
    packed from (TermBlock, the only term-major index).
    """

    # In the database the key is (catalog_id, chunk_id) (migration 0017). No foreign key
    # constraint: one on a partitioned table pins every chunk partition (a catalog's could
    # be neither emptied nor dropped alone), and the write path writes and deletes these
    # rows with their chunk's, in one transaction, as it does the BM25 blocks.
    chunk = models.OneToOneField(Chunk, on_delete=models.CASCADE, primary_key=True, db_constraint=False,
                                 related_name="postings")
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, db_constraint=False, db_index=False,
                                related_name="+")
    length = models.IntegerField(help_text="Document length in analysed terms (BM25 dl).")
    terms = ArrayField(models.IntegerField())
    tfs = ArrayField(models.IntegerField())

    def __str__(self) -> str:
        return f"postings of chunk {self.chunk_id}"


# Postings per TermBlock: 128 keep a row (three arrays of 4-byte values) under
# Postgres's 2 kB TOAST threshold, so a block is read inline, uncompressed.
TERM_BLOCK_POSTINGS = 128


class TermBlock(models.Model):
    """A term's postings packed for BM25's scorer: up to TERM_BLOCK_POSTINGS consecutive
    postings (in chunk id order) per row, as big-endian int4 arrays: each chunk's id
    less `first_chunk_id`, its tf and its dl. A term's blocks never overlap and hold
    exactly the postings of the term in its catalog's Postings rows; the write path
    repacks the blocks it touches from them in the same transaction
    (catalog.indexing.blocks), so BM25 reads the postings of a query term as a few rows
    instead of one index entry each. No database constraints: the write path keeps them
    in step with Postings; the catalog leads the key (one catalog's rows stay together).
    """

    pk = models.CompositePrimaryKey("catalog", "term", "first_chunk_id")
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, db_constraint=False, db_index=False,
                                related_name="+")
    term = models.ForeignKey(Term, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    first_chunk_id = models.BigIntegerField()
    last_chunk_id = models.BigIntegerField()
    postings = models.IntegerField(help_text="How many postings the block holds.")
    max_tf = models.IntegerField(help_text="The largest tf in the block.")
    min_dl = models.IntegerField(help_text="The smallest dl in the block.")
    chunk_ids = models.BinaryField(help_text="Each chunk id less first_chunk_id, int4 big-endian.")
    tfs = models.BinaryField(help_text="Each posting's tf, int4 big-endian.")
    dls = models.BinaryField(help_text="Each posting's chunk length (BM25 dl), int4 big-endian.")

    def __str__(self) -> str:
        return f"term {self.term_id}, chunks {self.first_chunk_id}-{self.last_chunk_id}"


class EmbeddingCache(models.Model):
    """Vectors by (model, sha256 of the chunk text): text that moved or was re-imported
    is never embedded twice, and an interrupted run resumes from what it embedded."""

    model = models.CharField(max_length=100)
    text_sha256 = models.CharField(max_length=64)
    embedding = VectorField(dimensions=DIMENSIONS)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model", "text_sha256"], name="embedding_cache_unique")]

    def __str__(self) -> str:
        return f"{self.model}:{self.text_sha256[:12]}"


class IndexRun(models.Model):
    """One reindex of one source: what triggered it, how far it got, what it did."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule"
        API = "api"
        COMMAND = "command"
        UI = "ui"
        RECOVERY = "recovery"  # queued again after its worker died mid-run

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="index_runs")
    source = models.ForeignKey(ReferenceSource, on_delete=models.CASCADE, related_name="index_runs")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    full = models.BooleanField(default=False, help_text="Re-chunk and re-embed every document.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=16, blank=True)
    progress = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(100)])
    counts = models.JSONField(default=dict, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    skipped = models.JSONField(
        default=list, blank=True,
        help_text="The files it could not read, each [path, why] (a scanned PDF, an encrypted or corrupt file, a "
                  "zip bomb, a submodule, a page that failed); the rest of the source indexed.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["source", "status"], name="indexrun_source_status")]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.source_id} ({self.status})"


class Agent(models.Model):
    """An API caller and its profile: which catalogs it may read, which
    references it starts with, how they reach it (preloaded into its instructions or
    searched with rag_search), and the thresholds detection uses for it.

    It lives on the ground floor because every layer asks who may read what: the
    catalog's curator API, the approvals gate and every retrieval path. Its table keeps
    the name it had when it lived in retrieval (catalog migration 0010)."""

    class Strategy(models.TextChoices):
        PRELOAD = "preload", "preload (content in the startup instructions, within the budget)"
        RAG = "rag", "rag (startup instructions list references; content via rag_search)"

    name = models.CharField(max_length=100, unique=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_hint = models.CharField(max_length=12, editable=False, help_text="First characters, to tell tokens apart.")
    catalogs = models.ManyToManyField(Catalog, related_name="agents", blank=True)
    is_active = models.BooleanField(default=True)
    is_curator = models.BooleanField(default=False, help_text="May trigger reindexing of its catalogs.")
    strategy = models.CharField(max_length=8, choices=Strategy.choices, default=Strategy.PRELOAD)
    preselected = models.ManyToManyField(
        ReferenceSource, related_name="preselected_by", blank=True,
        help_text="References pinned for this agent, beside those whose mode is preselected.",
    )
    token_budget = models.PositiveIntegerField(
        default=12_000, validators=[MinValueValidator(100), MaxValueValidator(1_000_000)],
        help_text="Tokens the startup instructions may use.",
    )
    default_top_k = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Results per rag_search call when the caller gives no top_k.",
    )
    semantic_threshold = models.FloatField(
        default=0.30, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Lowest cosine similarity between a text and a source's profile for a semantic hint.",
    )
    semantic_margin = models.FloatField(
        default=0.10, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="A semantic hint must also score within this much of the best semantic match.",
    )
    max_hints = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(50)],
        help_text="Most references hinted per enriched text.",
    )
    rag_relevance_threshold = models.FloatField(
        default=0.30, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Lowest relevance (0 to 1) of a memory or a passage injected into a conversation.",
    )
    rag_max_results = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(0), MaxValueValidator(20)],
        help_text="Most memories and passages injected into a conversation's newest user message.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # With a replica (catalog.reads): the primary's WAL position (bytes) after this
    # agent's latest write; its reads go to the replica only once it has replayed that far.
    read_fence = models.BigIntegerField(default=0, editable=False)

    class Meta:
        db_table = "retrieval_agent"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    # DRF's IsAuthenticated asks the request's user this.
    is_authenticated = True


class AuditEntry(models.Model):
    """One event in the append-only audit log. `hash` is sha256 over the entry's fields
    and `prev_hash`, the hash of entry seq - 1 (catalog.audit.chain), so changing or
    removing any entry breaks every later link; a trigger (approvals migration 0002, which made the table) makes the
    database refuse UPDATE, DELETE and TRUNCATE. The object references are plain ids,
    not foreign keys: the log outlives what it names and must never be cascaded."""

    class ActorKind(models.TextChoices):
        USER = "user"
        AGENT = "agent"
        SYSTEM = "system"
        CHANNEL = "channel"

    seq = models.BigIntegerField(primary_key=True)
    at = models.DateTimeField()
    actor_kind = models.CharField(max_length=8, choices=ActorKind.choices)
    actor_id = models.BigIntegerField(null=True, blank=True, help_text="The user's or agent's id.")
    actor_name = models.CharField(max_length=150, help_text="Username, agent name, system task or channel.")
    action = models.CharField(max_length=40)
    request_id = models.BigIntegerField(null=True, blank=True)
    policy_id = models.BigIntegerField(null=True, blank=True)
    source_id = models.BigIntegerField(null=True, blank=True)
    agent_id = models.BigIntegerField(null=True, blank=True)
    fingerprint = models.CharField(max_length=64, blank=True)
    payload = models.JSONField(default=dict)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["seq"]
        verbose_name_plural = "audit entries"
        db_table = "approvals_auditentry"  # made by approvals before the log moved to the floor
        indexes = [
            models.Index(fields=["action", "seq"], name="audit_action"),
            models.Index(fields=["request_id"], name="audit_request"),
            models.Index(fields=["source_id"], name="audit_source"),
            models.Index(fields=["agent_id"], name="audit_agent"),
            models.Index(fields=["at"], name="audit_at"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action}"
