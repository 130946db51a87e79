"""Resolve an operationId to the function that handles it, as the handlers name their arguments.

Connexion hands over `<x-openapi-router-controller>.<operationId>` (`handlers.risk_data.listDrivers`):
the camelCase operationId names the module's snake_case function (`list_drivers`). Connexion passes
the token's subject as `user`; that subject is an agency id, so handlers take it as `agency_id`.
Connexion reads a handler's arguments from its signature (after unwrapping `__wrapped__`), so the
adapter shows Connexion the signature it knows and is not itself marked as a wrapper.
"""

import functools
import inspect
from collections.abc import Callable
from typing import Any

from connexion.utils import get_function_from_name

from api import idempotency, precognition
from spec import function_name


def resolve(operation_id: str) -> Callable[..., Any]:
    """Return the handler of an operationId: guarded against writing on a dry-run and twice, given the agency as agency_id.

    An operation whose spec declares Idempotency-Key runs once per key (api.idempotency).
    """
    handler = _agency_as_user(get_function_from_name(function_name(operation_id)))
    if idempotency.declared(operation_id):
        handler = idempotency.guard(handler)
    return precognition.guard(handler)


def _agency_as_user(handler: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(handler)
    if "agency_id" not in signature.parameters:
        return handler

    def call(user: int, **kwargs: Any) -> Any:
        return handler(agency_id=user, **kwargs)

    functools.update_wrapper(call, handler)
    # Connexion must read call's signature, not the handler's. (typeshed's functions declare neither attribute,
    # which update_wrapper and inspect.signature use.)
    del call.__wrapped__  # type: ignore[attr-defined]
    params = [param.replace(name="user") if name == "agency_id" else param for name, param in signature.parameters.items()]
    call.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return call


__all__ = ["resolve"]
