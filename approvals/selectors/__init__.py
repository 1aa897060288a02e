"""The approvals app's reads: gate.py is the one gate every injection passes (what it
concludes, pure, then the statement that reads the policies and requests it judges);
requests.py reads approval requests beyond the gate (an agent's own, the reviewers'
queue, a request's detail and what the reviewer's pages show of it)."""
