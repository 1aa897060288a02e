"""The agent bearer scheme in the OpenAPI description (drf-spectacular), registered when
catalog's AppConfig.ready imports this module."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "catalog.auth.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer", "description": "An agent token from manage.py create_agent."}
