"""Outbound requests: `addresses` decides which addresses may be reached (pure), `client`
checks a URL and connects only where it checked (docs/architecture.md, "Outbound")."""
