"""What a webhook url may be: https, a public domain name, never an IP address in any spelling."""

import ipaddress
import re
import socket
from urllib.parse import urlsplit

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


def _is_ip_literal(host: str) -> bool:
    """Tell whether a host is an address in any spelling a resolver would take (127.1, 0x7f.1, 2130706433)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.inet_aton(host)
        return True
    except OSError:
        pass
    return bool(_NUMERIC_LABEL.match(host.rstrip(".").rsplit(".", 1)[-1]))


def url_problem(url: str, allow_private: bool) -> str | None:
    """Return why a webhook url is refused (to follow "The <field> field"), or None when it is fine."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return "must be a valid URL"
    if parts.scheme.lower() != "https":
        return "must start with https://"
    if not host:
        return "must be a valid URL"
    if parts.username is not None or parts.password is not None:
        return "must not contain credentials"
    if _is_ip_literal(host):
        return "must not be an IP address"
    name = host.rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return None if allow_private else "must be a public domain name"
    try:
        labels = name.encode("idna").decode("ascii").split(".")
    except (UnicodeError, ValueError):
        return "must be a valid URL"
    if not all(_LABEL.match(label) for label in labels):
        return "must be a valid URL"
    if len(labels) < 2:
        return "must be a public domain name"
    return None
