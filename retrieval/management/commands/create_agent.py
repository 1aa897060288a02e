from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from catalog.models import Catalog
from retrieval.models import Agent, hash_token, new_token


class Command(BaseCommand):
    help = "Create an agent scoped to catalogs and print its bearer token (shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--catalogs", required=True, help="comma-separated catalog slugs")
        parser.add_argument("--rotate", action="store_true", help="replace the token of an existing agent")
        parser.add_argument("--curator", action="store_true", help="the agent may also trigger reindexing")

    def handle(self, *args, name: str, catalogs: str, rotate: bool, curator: bool, **options):
        slugs = [s.strip() for s in catalogs.split(",") if s.strip()]
        found = list(Catalog.objects.filter(slug__in=slugs))
        missing = sorted(set(slugs) - {c.slug for c in found})
        if not slugs or missing:
            raise CommandError(f"unknown catalogs: {', '.join(missing) or '(none given)'}")
        existing = Agent.objects.filter(name=name).first()
        if existing and not rotate:
            raise CommandError(f"agent {name!r} exists; pass --rotate to issue a new token")
        token = new_token()
        with transaction.atomic():
            agent = existing or Agent(name=name)
            agent.token_hash, agent.token_hint = hash_token(token), token[:8]
            agent.is_curator = curator
            agent.save()
            agent.catalogs.set(found)
        self.stdout.write(token)
