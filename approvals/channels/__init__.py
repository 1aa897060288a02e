"""The channels decisions and events travel by, besides the web queue.

models.py              webhook endpoints, the events and their deliveries, the inbound
                       messages seen (replay refusal)
events.py              audit entries of requests -> events and their deliveries, written
                       in the appending transaction (each request service calls it)
webhooks/signing.py    Standard Webhooks signatures (pure; the standardwebhooks package)
webhooks/sealing.py    endpoint secrets sealed at rest with a key from SECRET_KEY
webhooks/endpoints.py  endpoint_create / _update / _rotate_secret / _delete (curators, audited)
webhooks/delivery.py   delivery_attempt: claim, sign, POST, record, back off
webhooks/inbound.py    signed decisions coming back: verify, refuse replays, decide
webhooks/apis.py       POST /api/v1/approvals/{id}/decision; curators' endpoint and
                       delivery endpoints
files.py               the decision-file directory
"""
