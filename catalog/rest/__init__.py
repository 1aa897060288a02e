"""What every app's endpoints share, on the ground floor so every app may use it: the JSON error shape and DRF's
exception handler (errors.py), strict request fields (fields.py) and the OpenAPI
description's shared parts (schema.py). The endpoints themselves live in each app's
apis.py."""
