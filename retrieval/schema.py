"""OpenAPI description of agent bearer tokens (drf-spectacular extension)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "retrieval.auth.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An agent token from manage.py create_agent."}
