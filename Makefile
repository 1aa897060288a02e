# Lectern: `make run` serves the app with its worker; `make test` runs the suite.
# Both set everything up first: virtualenv, dependencies, embedded Postgres, migrations.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MANAGE := $(PY) manage.py
HOST ?= 127.0.0.1:8000

.PHONY: run test setup db migrate demo lint nfcorpus evaluate bench stop-db clean chromium

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
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
	@trap 'trap - EXIT INT TERM; kill 0' EXIT INT TERM; \
	  DEBUG=$${DEBUG:-1} $(MANAGE) qcluster & \
	  DEBUG=$${DEBUG:-1} $(MANAGE) runserver --noreload $(HOST)

chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

test: setup chromium
	$(VENV)/bin/pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

NFCORPUS ?= ../shared/datasets/nfcorpus

# Imports NFCorpus once (later runs re-embed nothing: unchanged documents are skipped).
nfcorpus: setup
	$(MANAGE) import_jsonl $(NFCORPUS)/corpus.jsonl --catalog nfcorpus --source corpus

evaluate: nfcorpus
	$(MANAGE) evaluate --catalog nfcorpus --queries $(NFCORPUS)/queries.jsonl --qrels $(NFCORPUS)/qrels/test.tsv \
	  --modes bm25,vector,hybrid,bm25_tiebreak --json var/nfcorpus-eval.json

bench: nfcorpus
	$(MANAGE) bench
	$(MANAGE) bench_reindex --files 10000 --edits 5

stop-db:
	$(PY) -m config.embedded_pg stop

clean: stop-db
	rm -rf var
