"""Schemathesis hooks for fuzzing riskapi from outside (loaded by the repository's schemathesis.toml).

One hook, for the one rule of the spec that no JSON Schema can state: an `Idempotency-Key` names one
request. The spec asks a client to "send a new unique value (a UUID) with each write, and the same
value again only to retry that write"; the same key with another request answers 422 naming the
key (spec: `components.parameters.IdempotencyKey`). A generator draws header values independently per
case, so it sends one value (the parameter's example, the shortest string) with many different
requests. This hook does what a client does: every request whose key the schema accepts gets a key
of its own, still schema-valid, so no case turns from positive to negative or back. A key the case
made invalid on purpose (empty, too long, not printable ASCII) is sent as generated.
"""

import re
import uuid

import schemathesis

HEADER = "Idempotency-Key"
# The parameter's schema: 1 to 255 printable ASCII characters, no space at either end.
VALID = re.compile(r"[!-~]([ -~]*[!-~])?")


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    """Give each request with a schema-valid Idempotency-Key a key of its own."""
    headers = case.headers or {}
    for name, value in list(headers.items()):
        if name.lower() == HEADER.lower() and isinstance(value, str) and len(value) <= 255 and VALID.fullmatch(value):
            headers[name] = str(uuid.uuid4())
