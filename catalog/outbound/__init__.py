"""Outbound requests: `addresses` decides which addresses may be reached (pure), `client`
checks a URL and connects only where it checked (docs/subsystems/approval-channels.md, "Outbound";
docs/decisions/0025-outbound-requests-reach-only-public-addresses.md)."""
