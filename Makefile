# Lectern: `make run` serves the app with its worker; `make test` runs the suite;
# `make serve` is the production server (gunicorn + whitenoise + django-q2, DEBUG off).
# Both set everything up first: virtualenv, dependencies, embedded Postgres, migrations.
# `make test-fast` runs the unit tier alone: no database, so only the virtualenv.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# Python 3.11-3.13 makes the virtualenv: PYTHON=... when given, else python3 when it is
# one, else python3.13, python3.12, python3.11 from PATH (VENV=... keeps one per version).
PY_FITS := import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))
ifeq ($(wildcard $(PY)),)
CANDIDATES := $(or $(PYTHON),python3 python3.13 python3.12 python3.11)
BASE_PYTHON := $(firstword $(foreach p,$(CANDIDATES),$(shell $(p) -c '$(PY_FITS)' 2>/dev/null && echo $(p))))
$(if $(BASE_PYTHON),,$(error Lectern needs Python 3.11, 3.12 or 3.13; none of $(CANDIDATES) is one: install one or set PYTHON=/path/to/python3.1x))
endif
MANAGE := $(PY) manage.py
HOST ?= 127.0.0.1:8000

.PHONY: run serve production-database test test-fast test-topology screenshots setup db migrate demo lint nfcorpus evaluate tune bench stop-db clean chromium redis

# Every dependency installs from a wheel (--only-binary): nothing is compiled here.
NO_WHEEL = pip found no wheel for a pin above on $$($(PY) -c 'import sys, sysconfig; \
  print(sysconfig.get_platform(), "Python", sys.version.split()[0])'): Lectern installs wheels only (no compiler); \
  see docs/subsystems/operations.md, Installing
$(VENV)/.installed: pyproject.toml
ifeq ($(wildcard $(PY)),)
	$(BASE_PYTHON) -m venv $(VENV)
endif
	@$(PY) -c '$(PY_FITS)' || { echo "$(VENV) runs $$($(PY) -V); Lectern needs Python 3.11, 3.12 or 3.13: remove $(VENV) and run again" >&2; exit 1; }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --only-binary :all: -e '.[dev]' || { echo "$(NO_WHEEL)" >&2; exit 1; }
	touch $@

setup: $(VENV)/.installed db migrate

db: $(VENV)/.installed
	@if [ -z "$$DATABASE_URL" ]; then $(PY) -m config.embedded_pg start >/dev/null && echo "embedded postgres: running (var/pgdata)"; fi

migrate: db
	$(MANAGE) migrate --no-input -v 0

demo: migrate
	$(MANAGE) load_demo

run: setup demo
	@echo "Lectern at http://$(HOST)/  (stop with Ctrl-C: stops the server and the worker)"
	@echo "Sign in as admin with the password printed when the demo created that user (above, on the first run only)"
	@DEBUG=$${DEBUG:-1} $(PY) -m config.serve --dev $(HOST) --stop-with-parent

# Production: collectstatic, then gunicorn (config/gunicorn.conf.py) and a qcluster,
# stopping together (config/serve.py), and with make: a killed make stops them too.
# Settings from the environment: README "Settings"; serving: docs/deploying.md.
serve: production-database setup
	DEBUG=0 $(PY) -m config.serve --stop-with-parent

# Production serves only the database it is given (config/database.py, server_database):
# checked before setup, which would start the embedded Postgres.
production-database:
	@[ -n "$$DATABASE_URL" ] || { echo 'make serve: DATABASE_URL is not set: a production server (DEBUG off) serves only the database it is given, never the embedded development Postgres (docs/deploying.md); for development, `make run`' >&2; exit 1; }

chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# Debian's Redis, for the topology tests (a primary, its replica, Redis, two `make serve`
# programs: docs/deploying.md); installed when missing, as chromium is.
redis:
	@command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }

test: setup chromium redis
	$(VENV)/bin/pytest

# The topology alone: replica reads, and the test that kills a web process and a worker.
test-topology: setup redis
	$(VENV)/bin/pytest tests/config/test_replica_reads.py tests/config/test_topology.py

# The unit tier (tests/conftest.py assigns it): no database, no server, no browser, so
# neither the embedded Postgres nor migrations are set up for it.
test-fast: $(VENV)/.installed
	$(VENV)/bin/pytest -m unit

# Every browser test audits its pages (tests/browser.py) and photographs them at 1280 and
# 390 px: into var/screenshots normally, into docs/screenshots here.
# Every page the browser tests walk, at 1280 and 390 px, into var/screenshots/ (tests/browser.py);
# docs/screenshots/ keeps a curated few (its README.md).
screenshots: setup chromium
	$(VENV)/bin/pytest -m browser -p no:randomly -q

# lint-imports checks the layers contract in pyproject.toml. Settings start nothing, and
# the OpenAPI check builds the schema without a database.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(MANAGE) spectacular --validate --fail-on-warn --file /dev/null

NFCORPUS ?= ../shared/datasets/nfcorpus

# Imports NFCorpus once (later runs re-embed nothing: unchanged documents are skipped).
nfcorpus: setup
	$(MANAGE) import_jsonl $(NFCORPUS)/corpus.jsonl --catalog nfcorpus --source corpus

evaluate: nfcorpus
	$(MANAGE) evaluate --catalog nfcorpus --queries $(NFCORPUS)/queries.jsonl --qrels $(NFCORPUS)/qrels/test.tsv \
	  --modes bm25,vector,hybrid,bm25_tiebreak --json var/nfcorpus-eval.json

# A tuning run's grid and 5-fold held-out figures on NFCorpus (docs/benchmarks.md); reads only.
tune: nfcorpus
	$(MANAGE) tune --catalog nfcorpus --queries $(NFCORPUS)/queries.jsonl --qrels $(NFCORPUS)/qrels/test.tsv \
	  --json var/nfcorpus-tune.json

# The benchmarks live beside the product (benchmarks/, not installed): docs/benchmarks.md.
BENCH := $(PY) -m benchmarks

bench: nfcorpus
	$(BENCH) bench --dataset $(NFCORPUS)
	$(BENCH) bench_reindex --files 10000 --edits 5
	$(BENCH) bench_gate --dataset $(NFCORPUS) --sources 1000
	$(BENCH) bench_pages --dataset $(NFCORPUS)
	$(BENCH) bench_conversation --dataset $(NFCORPUS)
	$(BENCH) bench_conversation_recall --dataset $(NFCORPUS)
	$(BENCH) bench_feedback --dataset $(NFCORPUS)

stop-db:
	$(PY) -m config.embedded_pg stop

clean: stop-db
	rm -rf var
