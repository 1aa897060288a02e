import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.models import Catalog
from catalog.ranking import MODES
from retrieval.evaluation.beir import EvaluationInputError, ModeReport, score_run
from retrieval.evaluation.ranking import ModeUnavailable, rank_query
from retrieval.management.beir import read_test_set


class Command(BaseCommand):
    help = ("Score search modes on a BEIR test set: nDCG@10, Recall@100, MRR@10 and p50/p95 latency. "
            "Documents are ranked by their best chunk (dedup); document ids are the imported _ids. Ranked as a "
            "signed-in person's search ranks them: sources that need approval are left out.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--catalog", required=True)
        parser.add_argument("--queries", required=True, help="BEIR queries.jsonl")
        parser.add_argument("--qrels", required=True, help="BEIR qrels TSV (e.g. qrels/test.tsv)")
        parser.add_argument("--modes", default="bm25,vector,hybrid", help=f"comma-separated: {', '.join(MODES)}")
        parser.add_argument("--json", dest="json_out", help="also write the report as JSON here")
        parser.add_argument("--limit", type=int, default=0, help="evaluate only the first N queries (0: all)")

    def handle(self, *args: Any, catalog: str, queries: str, qrels: str, modes: str, json_out: str | None, limit: int,
               **options: Any) -> None:
        target = Catalog.objects.filter(slug=catalog).first()
        if target is None:
            raise CommandError(f"no catalog {catalog!r}")
        wanted = [m.strip() for m in modes.split(",") if m.strip()]
        unknown = [m for m in wanted if m not in MODES]
        if unknown or not wanted:
            raise CommandError(f"unknown modes {unknown}; choose from {', '.join(MODES)}")
        texts, judged = read_test_set(queries, qrels)
        ids = [q for q in judged if q in texts][: limit or None]
        reports = [self._run_mode(target, mode, ids, texts, judged) for mode in wanted]
        header = ("mode", "queries", "nDCG@10", "R@100", "MRR@10", "p50 ms", "p95 ms")
        self.stdout.write(f"{header[0]:<14}" + "".join(f"{h:>9}" for h in header[1:]))
        for r in reports:
            self.stdout.write(f"{r.mode:<14}{r.queries:>9}{r.ndcg_at_10:>9.4f}{r.recall_at_100:>9.4f}"
                              f"{r.mrr_at_10:>9.4f}{r.p50_ms:>9.1f}{r.p95_ms:>9.1f}")
        if json_out:
            Path(json_out).write_text(json.dumps({"catalog": catalog, "modes": [r.as_dict() for r in reports]},
                                                 indent=2) + "\n")

    def _run_mode(self, catalog: Catalog, mode: str, ids: list[str], texts: dict[str, str],
                  judged: dict[str, dict[str, int]]) -> ModeReport:
        runs: dict[str, list[str]] = {}
        latencies: list[float] = []
        for query_id in ids:
            try:
                runs[query_id], took = rank_query(catalog=catalog, mode=mode, text=texts[query_id])
            except ModeUnavailable as exc:
                raise CommandError(str(exc)) from None
            latencies.append(took)
        try:
            return score_run(mode, runs, judged, latencies)
        except EvaluationInputError as exc:
            raise CommandError(str(exc)) from None
