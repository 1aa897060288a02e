"""Approval policies, requests and decisions arrive with the approvals issue; the
catalog already marks sources that need approval (ReferenceSource.requires_approval)."""
