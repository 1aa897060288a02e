import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.models import Catalog
from catalog.ranking import ranking_problems
from retrieval.evaluation.beir import METRICS
from retrieval.evaluation.ranking import ModeUnavailable
from retrieval.evaluation.tuning import FEEDBACK, FOLDS, Feedback, ranking_tune
from retrieval.management.beir import read_test_set
from retrieval.search.vector import SearchUnavailable


class Command(BaseCommand):
    help = ("Tune a catalog's ranking settings on a BEIR test set with k-fold cross-validation over its queries, "
            "as a tuning run does, and report the held-out gain per metric with the settings chosen. Reads only: "
            "applying the choice is the dashboard's (refused unless the held-out nDCG@10 gain is positive).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--catalog", required=True)
        parser.add_argument("--queries", required=True, help="BEIR queries.jsonl")
        parser.add_argument("--qrels", required=True, help="BEIR qrels TSV (e.g. qrels/test.tsv)")
        parser.add_argument("--folds", type=int, default=FOLDS)
        parser.add_argument("--vector-feedback", dest="vector_feedback", default=None,
                            help="the vector feedback values tried, as CHUNKS:WEIGHT,... (off is always tried; "
                                 "default: " + ",".join(f"{c}:{w:g}" for c, w in FEEDBACK if c) + ")")
        parser.add_argument("--json", dest="json_out", help="also write the report as JSON here")

    def handle(self, *args: Any, catalog: str, queries: str, qrels: str, folds: int, json_out: str | None,
               vector_feedback: str | None, **options: Any) -> None:
        target = Catalog.objects.filter(slug=catalog).first()
        if target is None:
            raise CommandError(f"no catalog {catalog!r}")
        if not 2 <= folds <= 10:
            raise CommandError("--folds must be 2 to 10")
        feedback = FEEDBACK if vector_feedback is None else _feedback_values(vector_feedback)
        texts, judged = read_test_set(queries, qrels)
        started = time.perf_counter()
        try:
            report = ranking_tune(catalog=target, queries=texts, qrels=judged, folds=folds, feedback=feedback)
        except (SearchUnavailable, ModeUnavailable) as exc:
            raise CommandError(f"vector search is unavailable: {exc}") from None
        took = time.perf_counter() - started
        self.stdout.write(f"{report.candidates} settings, {folds}-fold, {sum(f['queries'] for f in report.folds)} "
                          f"queries, {took:.0f} s ({', '.join(f'{k} {v:.0f} s' for k, v in report.seconds.items())})")
        self.stdout.write(f"{'metric':<16}{'current':>9}{'held out':>10}{'gain':>9}")
        for metric in METRICS:
            m = report.metrics[metric]
            self.stdout.write(f"{metric:<16}{m['current']:>9.4f}{m['tuned']:>10.4f}{m['gain']:>+9.4f}")
        self.stdout.write(f"queries won / lost / tied: {report.counts['won']} / {report.counts['lost']} / "
                          f"{report.counts['tied']}")
        for i, fold in enumerate(report.folds, start=1):
            self.stdout.write(f"fold {i}: {fold['queries']} queries, {fold['current']:.4f} -> {fold['tuned']:.4f}, "
                              f"chose {json.dumps(fold['changes'])}")
        self.stdout.write(f"chosen on every query (in-sample nDCG@10 {report.in_sample:.4f}): "
                          f"{json.dumps(report.current.changes(report.chosen))}")
        if json_out:
            Path(json_out).write_text(json.dumps({"catalog": catalog, "seconds": round(took, 1),
                                                  **report.as_dict()}, indent=2) + "\n")


def _feedback_values(given: str) -> Feedback:
    """`--vector-feedback`'s CHUNKS:WEIGHT pairs, each within the ranking settings' limits,
    after off."""
    values: list[tuple[int, float]] = [FEEDBACK[0]]
    for part in filter(None, (p.strip() for p in given.split(","))):
        chunks, _, weight = part.partition(":")
        try:
            value = (int(chunks), float(weight))
        except ValueError:
            raise CommandError(f"--vector-feedback: {part!r} is not CHUNKS:WEIGHT (e.g. 3:0.5)") from None
        problems = ranking_problems({"vector_feedback": value[0], "feedback_weight": value[1]})
        if problems or value[0] == 0:
            why = "; ".join(f"{name}: {text}" for name, text in problems.items()) or "0 chunks is off, tried anyway"
            raise CommandError(f"--vector-feedback: {part!r}: {why}")
        values.append(value)
    return list(dict.fromkeys(values))
