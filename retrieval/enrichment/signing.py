"""Who an injection is signed for (retrieval.enrichment.formatting.InjectionSigner):
the agent (by id) or the person signed in (by username), and the end user whose
conversation it was placed in (enrich/conversation's `user_id`; none for enrich). An
injection is stripped only for that scope: a block an agent's end user pastes from
another end user's conversation, or from another agent's, is their text."""

from __future__ import annotations

from django.conf import settings
from django.utils.crypto import salted_hmac

from catalog.models import Agent
from retrieval.enrichment.caller import Caller
from retrieval.enrichment.formatting import InjectionSigner


def injection_keys() -> list[bytes]:
    """The keys injections are signed with (the first) and recognised by: derived from
    SECRET_KEY, then from each of SECRET_KEY_FALLBACKS, so that rotating the secret does
    not turn the injections in conversations under way into the user's text."""
    secrets = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    return [salted_hmac("lectern.injection", "key", secret=secret, algorithm="sha256").digest() for secret in secrets]


def injection_signer(*, agent: Agent | None, person: str = "", end_user: str = "") -> InjectionSigner:
    """The signer of injections placed for `agent` (else the person `person`) and, in a
    conversation, for its `end_user`. The end user's id is only hashed into the marker's
    MAC, never written."""
    who = f"agent {agent.pk}" if agent is not None else f"person {person}"
    return InjectionSigner(keys=injection_keys(), scope=f"{who}\nend user {end_user}")


def caller_signer(caller: Caller, end_user: str = "") -> InjectionSigner:
    return injection_signer(agent=caller.agent, person=caller.name, end_user=end_user)
