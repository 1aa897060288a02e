"""What the commands that read a BEIR test set share: its two files read, their
problems told as a CommandError."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import CommandError

from retrieval.evaluation.beir import EvaluationInputError, read_files


def read_test_set(queries: str, qrels: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """The query texts and the judgements (query -> document -> grade) of the files given."""
    try:
        return read_files(Path(queries), Path(qrels))
    except FileNotFoundError as exc:
        raise CommandError(f"no such file: {exc.filename}") from None
    except EvaluationInputError as exc:
        raise CommandError(str(exc)) from None
