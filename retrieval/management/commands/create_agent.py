from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from catalog.models import Catalog, ReferenceSource
from retrieval.models import Agent, hash_token, new_token


class Command(BaseCommand):
    help = "Create an agent scoped to catalogs, with its profile, and print its bearer token (shown only once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--catalogs", required=True, help="comma-separated catalog slugs")
        parser.add_argument("--rotate", action="store_true", help="replace the token of an existing agent")
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
        existing = Agent.objects.filter(name=name).first()
        if existing and not rotate:
            raise CommandError(f"agent {name!r} exists; pass --rotate to issue a new token")
        token = new_token()
        agent = existing or Agent(name=name)
        agent.token_hash, agent.token_hint = hash_token(token), token[:8]
        agent.is_curator = curator
        for field, value in (("strategy", strategy), ("token_budget", budget), ("default_top_k", top_k)):
            if value is not None:
                setattr(agent, field, value)
        try:
            agent.full_clean(exclude=["token_hash", "token_hint"])
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        with transaction.atomic():
            agent.save()
            agent.catalogs.set(found)
            if preselect or not existing:
                agent.preselected.set(preselected)
        self.stdout.write(token)


def _reference(ident: str, catalogs: list[Catalog]) -> ReferenceSource:
    catalog, _, slug = ident.rpartition("/")
    matches = list(ReferenceSource.objects.filter(catalog__in=catalogs, slug=slug)
                   .filter(**({"catalog__slug": catalog} if catalog else {})))
    if len(matches) != 1:
        problem = "unknown" if not matches else "ambiguous (write catalog/id)"
        raise CommandError(f"reference {ident!r} is {problem} in the agent's catalogs")
    return matches[0]
