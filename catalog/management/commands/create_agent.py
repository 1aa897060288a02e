from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.agents import agent_token_rotate
from catalog.models import Agent, Catalog, ReferenceSource


class Command(BaseCommand):
    help = "Create an agent scoped to catalogs, with its profile, and print its bearer token (shown only once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--catalogs", required=True, help="comma-separated catalog slugs")
        parser.add_argument("--rotate", action="store_true",
                            help="replace the token of an existing agent (a revoked one is active again)")
        parser.add_argument("--curator", action="store_true", help="the agent may also trigger reindexing")
        parser.add_argument("--strategy", choices=Agent.Strategy.values, help="preload (default) or rag")
        parser.add_argument("--budget", type=int, help="token budget of the startup instructions")
        parser.add_argument("--top-k", type=int, dest="top_k", help="default rag_search results")
        parser.add_argument("--preselect", default="",
                            help="comma-separated reference ids pinned for this agent (catalog/id when ambiguous)")

    def handle(self, *args: Any, name: str, catalogs: str, rotate: bool, curator: bool, strategy: str | None,
               budget: int | None, top_k: int | None,
               preselect: str, **options: Any) -> None:
        slugs = [s.strip() for s in catalogs.split(",") if s.strip()]
        found = list(Catalog.objects.filter(slug__in=slugs))
        missing = sorted(set(slugs) - {c.slug for c in found})
        if not slugs or missing:
            raise CommandError(f"unknown catalogs: {', '.join(missing) or '(none given)'}")
        preselected = [_reference(ident.strip(), found) for ident in preselect.split(",") if ident.strip()]
        existing = Agent.objects.filter(name=name).exists()
        if existing and not rotate:
            raise CommandError(f"agent {name!r} exists; pass --rotate to issue a new token")
        given: dict[str, Any] = {field: value for field, value in (("strategy", strategy), ("token_budget", budget),
                                                   ("default_top_k", top_k)) if value is not None}
        try:  # an existing agent keeps its pinned references unless --preselect names others
            _, token = agent_token_rotate(name=name, catalogs=found, is_curator=curator, **given,
                                          preselected=preselected if preselect or not existing else None)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        self.stdout.write(token)


def _reference(ident: str, catalogs: list[Catalog]) -> ReferenceSource:
    catalog, _, slug = ident.rpartition("/")
    matches = list(ReferenceSource.objects.filter(catalog__in=catalogs, slug=slug)
                   .filter(**({"catalog__slug": catalog} if catalog else {})))
    if len(matches) != 1:
        problem = "unknown" if not matches else "ambiguous (write catalog/id)"
        raise CommandError(f"reference {ident!r} is {problem} in the agent's catalogs")
    return matches[0]
