"""The embedded Postgres (config/embedded_pg.py): restarts after a hard kill, stale pid
files, taking over or refusing a data directory another build made, the CPU check.

The server tests run a server of their own on a temporary data directory, initialised
once for the module (initdb and the tuning restart cost seconds) and left stopped by each
test; the suite's own server (var/pgdata) is not touched."""

from __future__ import annotations

import os
import pwd
import signal
import struct
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
import pytest

from benchmarks.connections import wait_until
from config import embedded_pg
from config.embedded_pg import EmbeddedPostgresError
from tests.config.servers import private_dir

BASE_DIR = Path(__file__).resolve().parents[2]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the server runs as another user only when started as root")


@pytest.fixture(scope="module")
def pgdata():
    """An initialised, tuned data directory whose server is stopped between tests."""
    with private_dir("embedded") as root:
        path = root / "pgdata"
        embedded_pg.ensure_running(path, "probe")
        embedded_pg.stop(path)
        try:
            yield path
        finally:
            embedded_pg.stop(path)


@pytest.fixture
def server(pgdata):
    """Starts the module's server for one test and stops it afterwards."""
    yield embedded_pg.ensure_running(pgdata, "probe")
    embedded_pg.stop(pgdata)


def test_a_first_start_initialises_and_tunes_the_data_directory(pgdata):
    assert (pgdata / "PG_VERSION").read_text().strip() == "18"
    assert "shared_buffers = '1GB'" in (pgdata / "postgresql.auto.conf").read_text()
    assert not (pgdata / "postmaster.pid").exists()


def test_the_server_serves_pgvector_and_pg_trgm(server):
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        distance, = conn.execute("SELECT '[1,0,0]'::vector <=> '[0,1,0]'::vector").fetchall()[0]
        similarity, = conn.execute("SELECT similarity('circuit breaker', 'circuit breakers')").fetchall()[0]
    assert distance == pytest.approx(1.0)
    assert similarity > 0.5


def test_a_server_killed_with_sigkill_restarts_with_its_committed_rows(pgdata, server):
    # Given a committed row and a postmaster killed with SIGKILL (its pid file stays behind)
    owner = embedded_pg.known_uri(pgdata, "probe", role=embedded_pg.OWNER_ROLE)  # the app's role may not make tables
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS kept; CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
    killed = embedded_pg._postmaster(pgdata)
    assert killed is not None
    processes = [psutil.Process(killed.pid), *psutil.Process(killed.pid).children()]
    os.kill(killed.pid, signal.SIGKILL)
    _gone, alive = psutil.wait_procs(processes, timeout=60)  # backends notice the death and exit
    assert not alive
    assert (pgdata / "postmaster.pid").exists()

    # When Lectern next asks for the server
    embedded_pg.ensure_running(pgdata, "probe", role=embedded_pg.OWNER_ROLE)

    # Then the stale pid file made way for a new server, which recovered the row
    restarted = embedded_pg._postmaster(pgdata)
    assert restarted is not None and restarted.pid != killed.pid
    with psycopg.connect(owner) as conn:
        assert conn.execute("SELECT v FROM kept").fetchone() == (42,)


def test_a_replica_copies_the_running_server_and_replays_what_it_writes(pgdata, server):
    owner = embedded_pg.known_uri(pgdata, "probe", role=embedded_pg.OWNER_ROLE)
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS replayed; CREATE TABLE replayed (v int); INSERT INTO replayed VALUES (1)")
    with private_dir("replica") as root:
        replica = root / "replica"
        env = {**os.environ, "LECTERN_PGDATA": str(pgdata), "LECTERN_PGREPLICA": str(replica),
               "LECTERN_DB_NAME": "probe"}
        try:
            # the developer's command: copied, started, its address for the app's role
            started = subprocess.run([sys.executable, "-m", "config.embedded_pg", "replica", "start"], cwd=BASE_DIR,
                                     env=env, capture_output=True, text=True, timeout=300)
            assert started.returncode == 0, started.stderr
            assert started.stdout == f"postgresql://lectern_app:@/probe?host={replica}&port=5432\n"
            with psycopg.connect(owner, autocommit=True) as conn:
                conn.execute("INSERT INTO replayed VALUES (2)")
                (written,) = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchall()[0]
            copy = embedded_pg.known_uri(replica, "probe", role=embedded_pg.OWNER_ROLE)
            with psycopg.connect(copy, autocommit=True) as conn:
                wait_until(lambda: conn.execute("SELECT pg_last_wal_replay_lsn() >= %s", [written]).fetchall()[0][0],
                           60, "the replica to replay the insert")
                assert conn.execute("SELECT array_agg(v ORDER BY v) FROM replayed").fetchone() == ([1, 2],)
                with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                    conn.execute("INSERT INTO replayed VALUES (3)")
            status = subprocess.run([sys.executable, "-m", "config.embedded_pg", "replica", "status"], cwd=BASE_DIR,
                                    env=env, capture_output=True, text=True, timeout=60)
            assert status.stdout == "running\n"
        finally:
            embedded_pg.stop(replica)


def test_a_replica_of_a_stopped_server_is_refused_in_one_line(pgdata, tmp_path):
    with pytest.raises(EmbeddedPostgresError, match=r"^embedded postgres is not running on .+: start it first"):
        embedded_pg.replica_ensure(pgdata, tmp_path / "replica", "probe")
    assert not (tmp_path / "replica").exists()


def test_the_address_is_read_without_a_start_from_the_running_server_or_where_one_will_listen(pgdata):
    # Given the stopped server, the address is where a start puts the socket
    assert embedded_pg.known_uri(pgdata, "probe") == f"postgresql://lectern_app:@/probe?host={pgdata}&port=5432"
    assert embedded_pg.known_uri(pgdata, "probe", role=embedded_pg.OWNER_ROLE) == (
        f"postgresql://lectern_owner:@/probe?host={pgdata}&port=5432")
    assert not (pgdata / "postmaster.pid").exists(), "reading it started nothing"

    # When it runs, the address is what its postmaster.pid says, the one ensure_running gave
    try:
        uri = embedded_pg.ensure_running(pgdata, "probe")
        assert embedded_pg.known_uri(pgdata, "probe") == uri
    finally:
        embedded_pg.stop(pgdata)


def test_the_app_role_owns_nothing_and_a_database_made_before_the_roles_is_taken_over(pgdata):
    as_superuser = embedded_pg.known_uri(pgdata, "postgres", role=embedded_pg.SUPERUSER)
    legacy = embedded_pg.known_uri(pgdata, "legacy", role=embedded_pg.SUPERUSER)
    try:
        # Given a database whose table (with its identity sequence), view, sequence and
        # trigger function belong to `postgres`, as Lectern's earlier checkouts made them
        embedded_pg.ensure_running(pgdata, "probe")
        with psycopg.connect(as_superuser, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS legacy")
            conn.execute("CREATE DATABASE legacy")
        with psycopg.connect(legacy, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, v vector(3)); "
                         "CREATE VIEW kept_view AS SELECT id FROM kept; CREATE SEQUENCE counter; "
                         "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$")

        # When Lectern next asks for it
        embedded_pg.ensure_running(pgdata, "legacy")

        # Then the owner role owns the database and everything in it but the extensions' own
        with psycopg.connect(legacy, autocommit=True) as conn:
            relations: dict[str, str] = dict(conn.execute(
                "SELECT relname, pg_get_userbyid(relowner) FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE nspname = 'public'").fetchall())
            functions: dict[str, str] = dict(conn.execute(
                "SELECT proname, pg_get_userbyid(proowner) FROM pg_proc p JOIN pg_namespace n "
                "ON n.oid = p.pronamespace WHERE nspname = 'public' AND proname IN ('refuse', 'vector_in')").fetchall())
            database = conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database "
                                    "WHERE datname = 'legacy'").fetchone()
            roles = conn.execute("SELECT rolname, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls "
                                 "FROM pg_roles WHERE rolname LIKE 'lectern%' ORDER BY rolname").fetchall()
    finally:
        embedded_pg.stop(pgdata)
    assert {"kept", "kept_id_seq", "kept_pkey", "kept_view", "counter"} <= set(relations)
    assert set(relations.values()) == {"lectern_owner"}
    assert functions == {"refuse": "lectern_owner", "vector_in": "postgres"}
    assert database == ("lectern_owner",)
    assert roles == [("lectern_app", False, False, False, False, False),
                     ("lectern_owner", False, True, False, False, False)]


def test_a_manage_py_command_that_uses_the_database_starts_the_server(pgdata):
    # Given the stopped server and no DATABASE_URL (a fresh checkout after `make setup`)
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", LECTERN_PGDATA=str(pgdata), LECTERN_DB_NAME="probe",
               SECRET_KEY="x" * 50)
    try:
        # When a command that reads the database runs
        done = subprocess.run([sys.executable, "manage.py", "showmigrations", "catalog"], cwd=BASE_DIR, env=env,
                              capture_output=True, text=True, timeout=300)

        # Then manage.py started the server first, and the command read it
        assert done.returncode == 0, done.stderr
        assert "[ ] 0001_initial" in done.stdout
        assert embedded_pg._postmaster(pgdata) is not None
    finally:
        embedded_pg.stop(pgdata)


def test_a_pid_file_naming_another_program_is_stale(pgdata):
    # Given a pid file left by a hard kill whose pid now belongs to another program (this one)
    pid_file = pgdata / "postmaster.pid"
    pid_file.write_text(f"{os.getpid()}\n{pgdata}\n1700000000\n5432\n{pgdata}\n\n  5432001 7\nready   \n")
    try:
        # When Lectern asks for the server, then it starts one
        uri = embedded_pg.ensure_running(pgdata, "probe")
        started = embedded_pg._postmaster(pgdata)
        assert started is not None and started.pid != os.getpid()
        with psycopg.connect(uri) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        embedded_pg.stop(pgdata)


@as_root
def test_a_data_directory_of_the_previous_engine_is_taken_over(pgdata, monkeypatch):
    # Given the stopped data directory owned by the previous engine's user (here: nobody)
    monkeypatch.setattr(embedded_pg, "PREVIOUS_USER", "nobody")
    nobody = pwd.getpwnam("nobody")
    embedded_pg._chown_tree(pgdata, nobody)
    try:
        # When Lectern starts the server
        uri = embedded_pg.ensure_running(pgdata, "probe")
    finally:
        embedded_pg.stop(pgdata)

    # Then no file is left to the previous user, the move is noted, and the data was served
    owners = {path.stat().st_uid for path in [pgdata, *pgdata.rglob("*")] if not path.is_symlink()}
    assert nobody.pw_uid not in owners
    assert pgdata.stat().st_uid == (pgdata / "global" / "pg_control").stat().st_uid == pwd.getpwnam(
        embedded_pg.SYSTEM_USER).pw_uid
    assert "from nobody" in (pgdata / "lectern-moved").read_text()
    assert uri.startswith("postgresql://lectern_app:@/probe?host=")


@as_root
def test_a_data_directory_of_another_user_is_refused(tmp_path):
    catalog = embedded_pg._binary_versions()[1]
    assert catalog is not None
    datadir = _fake_data_dir(tmp_path, major="18", catalog=catalog)
    os.chown(datadir, pwd.getpwnam("nobody").pw_uid, -1)

    with pytest.raises(EmbeddedPostgresError, match=r"belongs to user nobody, not embedded_postgres: .*chown -R"):
        embedded_pg._adopt_data_dir(datadir)


def test_a_data_directory_of_another_major_version_is_refused_in_one_line(tmp_path):
    datadir = _fake_data_dir(tmp_path, major="16", catalog=202307071)

    with pytest.raises(EmbeddedPostgresError) as refused:
        embedded_pg._adopt_data_dir(datadir)

    assert "\n" not in str(refused.value)
    assert "holds Postgres 16 data; embedded-postgres runs Postgres 18" in str(refused.value)
    assert "pg_dumpall" in str(refused.value)


def test_a_data_directory_of_another_catalog_version_is_refused(tmp_path):
    datadir = _fake_data_dir(tmp_path, major="18", catalog=202406281)

    with pytest.raises(EmbeddedPostgresError, match=r"catalog version 202406281; .* expects 20\d{7}: dump it"):
        embedded_pg._adopt_data_dir(datadir)


def _fake_data_dir(tmp_path, *, major: str, catalog: int):
    datadir = tmp_path / "pgdata"
    (datadir / "global").mkdir(parents=True)
    (datadir / "PG_VERSION").write_text(major + "\n")
    (datadir / "global" / "pg_control").write_bytes(struct.pack("=QII", 7, 1800, catalog) + bytes(8176))
    return datadir


def test_a_cpu_without_avx2_is_refused_before_any_start():
    haswell_less = {"sse4_2", "popcnt", "avx"}

    with pytest.raises(EmbeddedPostgresError, match=r"this CPU lacks avx2, fma, f16c, bmi1, bmi2, abm, movbe, .*"
                                                     r"set DATABASE_URL"):
        embedded_pg._check_cpu(haswell_less)


def test_an_x86_64_v3_cpu_or_another_architecture_passes():
    embedded_pg._check_cpu(set(embedded_pg.X86_64_V3_FLAGS) | {"avx512f"})
    embedded_pg._check_cpu(None)  # not x86-64, or flags unknown: nothing to check
