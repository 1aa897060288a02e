"""Citations: what every search hit and injected passage carries so that an agent can
quote it and a curator can find the exact text it was served, after the source changed."""
