#!/bin/sh
# The automated part of the launch checklist. Run from the service's repository root.
set -eu
fail=0
if grep -q '{{' README.md; then echo "README.md still has placeholders"; fail=1; fi
if ! grep -qi 'owners' README.md; then echo "README.md names no owners"; fail=1; fi
if ! grep -rqs 'healthz' src/ 2>/dev/null; then echo "no /healthz route found under src/"; fail=1; fi
exit $fail
