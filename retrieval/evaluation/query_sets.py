"""Stored test sets: a curator's queries.jsonl and qrels TSV, read, checked against each
other and kept (only the judged queries) under a name, for one catalog, so later runs
of that catalog ask the same questions. The one place a set is made, for the
dashboard's upload and the API."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.template.defaultfilters import filesizeformat

from catalog.models import Catalog
from catalog.sources.uploads import max_upload_bytes
from retrieval.evaluation.beir import QRELS, QUERIES, EvaluationInputError, read_query_set
from retrieval.models import EvaluationSet

FILE_NAMES = {QUERIES: "queries.jsonl", QRELS: "qrels"}


def query_set_problems(*, queries: str, qrels: str) -> dict[str, list[str]]:
    """Why these files cannot be a test set, by field ("queries", "qrels"); empty when they can."""
    problems: dict[str, list[str]] = {}
    for field, text in ((QUERIES, queries), (QRELS, qrels)):
        if not text.strip():
            problems[field] = [f"{FILE_NAMES[field]} is empty."]
        elif "\x00" in text:
            problems[field] = [f"{FILE_NAMES[field]} holds NUL characters, so it is not a text file."]
        elif (size := len(text.encode())) > max_upload_bytes():
            problems[field] = [f"{FILE_NAMES[field]} is {_size(size)}; a test set's file may be at most "
                               f"{_size(max_upload_bytes())} (LECTERN_MAX_UPLOAD_BYTES)."]
    return problems


def _size(n: int) -> str:
    return str(filesizeformat(n)).replace("\xa0", " ")  # plain spaces: the API's messages are JSON


NAME_TAKEN = "A test set with this name exists already."


def query_set_create(*, catalog: Catalog, name: str, queries: str, qrels: str, by: str,
                     description: str = "") -> EvaluationSet:
    """A test set of `catalog` from the two files' texts; ValidationError naming the
    field of each problem (name taken in this catalog, a file too large, bad lines with
    their numbers, a judged query missing from the queries, too many judged queries)."""
    if problems := query_set_problems(queries=queries, qrels=qrels):
        raise ValidationError(problems)
    try:
        data = read_query_set(queries.splitlines(), qrels.splitlines(),
                              max_queries=settings.LECTERN_EVAL_MAX_QUERIES)
    except EvaluationInputError as error:
        raise ValidationError({field or QRELS: lines for field, lines in error.problems.items()}) from None
    query_set = EvaluationSet(catalog=catalog, name=name.strip(), description=description.strip(),
                              queries=data.queries, qrels=data.qrels, query_count=len(data.queries),
                              judgement_count=data.judgements, unjudged_count=data.unjudged, created_by=by)
    query_set.full_clean(validate_constraints=False)  # the name: not blank, not too long
    if EvaluationSet.objects.filter(catalog=catalog, name=query_set.name).exists():  # the catalog's names only
        raise ValidationError({"name": [NAME_TAKEN]})
    try:
        with transaction.atomic():
            query_set.save()
    except IntegrityError:  # the same name saved meanwhile
        raise ValidationError({"name": [NAME_TAKEN]}) from None
    return query_set
