"""Shared fixtures: a real embedded Postgres (pytest-django's test database), the real
ONNX embedder, named callers per role, and a browser (Debian's chromium driven by
Playwright); the test tiers (`unit`, `integration`)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from django.test import Client

from catalog.models import Catalog
from catalog.sources.documents import DocumentInput
from tests.browser import console_watch
from tests.factories import agent_with_token, import_documents, person

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"

# --- Test tiers ----------------------------------------------------------------------------
# `unit`: no database, no server, no child process; `make test-fast` runs them alone, with
# no Postgres anywhere. `integration`: the rest. Each test gets its tier from what it
# uses, so a new test lands in the right one unmarked; a tier marked by hand wins.

# Fixtures that reach the database (directly or through fixtures built on them: the
# catalogs, tokens and demo below), a live server or a browser.
INTEGRATION_FIXTURES = frozenset({
    "db", "transactional_db", "django_db_setup", "django_db_reset_sequences",
    "django_db_serialized_rollback", "live_server", "page",
})
# A test module holding one of these starts processes (manage.py children, servers, a
# Postgres of its own): all its tests are integration.
PROCESS_MODULES = frozenset({
    "subprocess", "multiprocessing", "config.embedded_pg", "benchmarks.connections", "config.serve",
    "tests.config.servers", "tests.topology", "benchmarks.topology", "tests.gitserver", "tests.websites",
    "benchmarks.web",
})


def _starts_processes(module: ModuleType) -> bool:
    def origin(value: object) -> object:
        return value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)

    return any(origin(value) in PROCESS_MODULES for value in vars(module).values())


def _integration(item: pytest.Item) -> bool:
    if item.get_closest_marker("django_db") or item.get_closest_marker("browser"):
        return True
    if INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return module is not None and _starts_processes(module)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not (item.get_closest_marker("unit") or item.get_closest_marker("integration")):
            item.add_marker(pytest.mark.integration if _integration(item) else pytest.mark.unit)


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request, monkeypatch):
    """A unit test that starts a process fails here, in `make test` too, rather than
    passing there and needing a server under `make test-fast` (pytest-django already
    refuses database access to tests without the db fixtures)."""
    if request.node.get_closest_marker("unit"):
        def refuse(self, *args, **options):
            command = args[0] if args else options.get("args")
            raise RuntimeError(f"a unit test started {command!r}: mark it integration (tests/conftest.py, Test tiers)")

        monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


@pytest.fixture(scope="session")
def app_credentials() -> dict[str, str]:
    """The app role's USER and PASSWORD, as the settings name them before the test
    database is made as the owner."""
    from django.conf import settings

    return {key: settings.DATABASES["default"][key] for key in ("USER", "PASSWORD")}


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, app_credentials):
    """Before pytest-django makes the test database: the embedded Postgres started
    (unless DATABASE_URL names a server) and the settings pointed where it listens, as
    the schema's owner, who makes and migrates the test database (django_db_setup below
    hands the connection to the app's role after). Importing the settings started
    nothing, so the unit tier runs without a server."""
    from django.conf import settings

    from config.database import database_from_url, ensure_database

    try:
        uri = ensure_database()
    except SystemExit as exc:  # one line saying what to do
        pytest.exit(str(exc), returncode=1)
    if uri is not None:
        where = database_from_url(uri)
        settings.DATABASES["default"].update(HOST=where["HOST"], PORT=where["PORT"])
    settings.DATABASES["default"].update(settings.LECTERN_DATABASE_OWNER)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker, app_credentials):
    """pytest-django's test database, made and migrated as the owner (above); every test
    then runs as the app's role, as the app itself does, so the suite proves the app
    needs no more (tests/config/test_database_roles.py: what that role cannot do). The
    owner again at the end, to drop the database."""
    from django.conf import settings
    from django.db import connections

    with django_db_blocker.unblock():
        connections["default"].close()
    settings.DATABASES["default"].update(app_credentials)
    yield
    with django_db_blocker.unblock():
        connections["default"].close()
    settings.DATABASES["default"].update(settings.LECTERN_DATABASE_OWNER)


AUDIT_TABLE = "approvals_auditentry"


@pytest.fixture(scope="session", autouse=True)
def _flushes_run_as_the_owner():
    """Transactional tests end with Django's flush, one TRUNCATE of every table, which
    the app's role may not run and the audit log's trigger refuses (approvals migration
    0002). The test harness runs it as the tables' owner, who disables that one trigger
    around it and only there; every test still meets the guard, and tests/approvals
    proves it holds."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    from tests.owner import owner_execute

    def execute_sql_flush(self, sql_list):
        statements = [(sql, ()) for sql in sql_list]
        if any(AUDIT_TABLE in sql for sql in sql_list):
            statements = [(f"ALTER TABLE {AUDIT_TABLE} DISABLE TRIGGER approvals_audit_no_truncate", ()),
                          *statements, (f"ALTER TABLE {AUDIT_TABLE} ENABLE TRIGGER approvals_audit_no_truncate", ())]
        owner_execute(statements, alias=self.connection.alias)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "execute_sql_flush", execute_sql_flush)
        yield


@pytest.fixture
def as_owner(transactional_db):
    """The test's connection as the schema's owner, for a tool that changes the schema
    (the benchmarks drop and build an index: `python -m benchmarks` runs as the owner
    too). Transactional tests only: the connection is closed to switch roles."""
    from config.database_roles import connected_as_owner

    with connected_as_owner():
        yield


@pytest.fixture(autouse=True)
def _audit_checkpoints_apart(settings, tmp_path_factory, request):
    """Each test writes and reads audit checkpoints in a folder of its own (made only
    when one is written), never var/'s: those anchor another database's chain."""
    folder = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]
    settings.LECTERN_AUDIT_CHECKPOINT_DIR = tmp_path_factory.getbasetemp() / "audit-checkpoints" / folder


@pytest.fixture
def make_catalog(db):
    def make(slug: str = "docs", **fields) -> Catalog:
        return Catalog.objects.create(slug=slug, name=fields.pop("name", slug.title()), **fields)

    return make


@pytest.fixture
def indexed_catalog(make_catalog):
    """A small catalog indexed through the real write path (chunker, ONNX, Postgres)."""
    catalog = make_catalog("ops")
    documents = [
        DocumentInput("circuit-breaker.md", "Circuit breaker",
                      "A circuit breaker stops calls to a failing dependency. After repeated failures it opens; "
                      "after a cool-down it lets one trial request through.", 140),
        DocumentInput("retries.md", "Retries", "Retry transient failures with exponential backoff and jitter. "
                      "Cap the number of attempts.", 90),
        DocumentInput("caching.md", "Caching", "Cache responses with a time to live. Invalidate the cache on "
                      "every write to the underlying record.", 100),
        DocumentInput("logging.md", "Logging", "Log in JSON. Never log secrets or tokens in clear text.", 60),
    ]
    import_documents(catalog=catalog, slug="handbook", documents=documents)
    catalog.refresh_from_db()
    return catalog


@pytest.fixture
def agent_token(db):
    """make(name, catalogs) -> bearer token of a new agent scoped to those catalogs."""

    def make(name: str, catalogs: list[Catalog]) -> str:
        _, token = agent_with_token(name=name, catalogs=catalogs)
        return token

    return make


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    """The shipped demo catalog (13 references) with the demo agent's token, loaded
    once per module inside a transaction rolled back when the module is done, its
    detection profiles embedded as `manage.py load_demo` does; each test runs in a
    savepoint inside it, so tests still cannot see each other."""
    from django.db import transaction

    from catalog.demo_loader import demo_load
    from retrieval.enrichment.detection import catalog_index

    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            report = demo_load()
            catalog_index(report.catalog)
            yield report
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


# --- people signed in ---------------------------------------------------------------------


@pytest.fixture
def cora(db):
    """A curator."""
    return person("cora", "curator")


@pytest.fixture
def rita(db):
    """A reviewer."""
    return person("rita", "reviewer")


@pytest.fixture
def client_for():
    """client_for(user, csrf=False) -> a Client signed in as `user` (csrf: checked, as
    a browser's post is)."""
    def make(user, *, csrf: bool = False) -> Client:
        client = Client(enforce_csrf_checks=csrf)
        client.force_login(user)
        return client

    return make


# --- the browser ----------------------------------------------------------------------------
# Debian's chromium (`make chromium`), driven by Playwright for Python: never a browser
# Playwright downloads. One per test module; each test gets a fresh context (no cookies).

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
BROWSER_WAIT_MS = 15_000  # a bound on every wait, not a pause


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is missing: `make chromium` installs it")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread, which Django's ORM (used
    # by fixtures and the transactional flush) would otherwise refuse.
    with pytest.MonkeyPatch.context() as patch, sync_api.sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        # Assertions wait as long as actions do (Playwright's expect has its own 5 s
        # default): one bound for every wait, which a loaded machine still meets.
        sync_api.expect.set_options(timeout=BROWSER_WAIT_MS)
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    """A page in a fresh browser context; every wait in it (actions and expect) fails
    after 15 seconds; its console errors are collected for tests.browser.page_audit."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    context.set_default_timeout(BROWSER_WAIT_MS)
    page = context.new_page()
    console_watch(page)  # tests.browser.page_audit: no console errors
    yield page
    context.close()
