"""Who an injection is signed for (retrieval.enrichment.formatting.InjectionSigner):
the agent (by id) or the person signed in (by username), and the end user whose
conversation it was placed in (enrich/conversation's `user_id`; none for enrich).

Stripped for that scope and, in an end user's conversation, for the same agent's scope
without an end user: the hint blocks enrich added to a message the agent then sends on
in that conversation, which would otherwise pile up there turn after turn. That widens
nothing: the MAC covers the text the block was appended to, so it is removed only from
that very text, and only the agent's own. Never another agent's injection, nor one
placed for another end user: a block pasted from such a conversation is the user's text."""

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
    conversation, for its `end_user`; with an end user, it strips the agent's own
    injections without one too. The end user's id is only hashed into the marker's MAC,
    never written."""
    who = f"agent {agent.pk}" if agent is not None else f"person {person}"
    scopes = [f"{who}\nend user {end_user}"]
    if end_user:
        scopes.append(f"{who}\nend user ")  # what enrich added for the agent, in no one's conversation
    return InjectionSigner(keys=injection_keys(), scopes=scopes)


def caller_signer(caller: Caller, end_user: str = "") -> InjectionSigner:
    return injection_signer(agent=caller.agent, person=caller.name, end_user=end_user)
