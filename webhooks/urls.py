"""What a webhook url may be: https, a public domain name, never an IP address in any spelling.

Subscription checks and delivery (jobs.https.transport) both work on `normalise(url)`, so a url that is
accepted can be sent, and one that delivery would refuse is refused when it is subscribed.
"""

import ipaddress
import re
import socket
from urllib.parse import quote, urlsplit, urlunsplit

import spec

MAX_LENGTH = 2048  # the column's size, and the spec's maxLength

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
# C0 controls, space, DEL and C1 controls: http.client refuses some, receivers misread the rest.
_UNSENDABLE = re.compile(r"[\x00-\x20\x7f-\x9f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
# Names that never resolve on the public internet: a receiver there is private or nowhere, with or without the
# root's trailing dot. The spec lists them (WebhookUrl's x-not-public-names), so clients and fuzzers can read them.
_NOT_PUBLIC = tuple(spec.schema("WebhookUrl")["x-not-public-names"])


def _percent_encode(text: str) -> str:
    """Percent-encode the non-ASCII characters of text as UTF-8, leaving the rest (and existing escapes) alone."""
    return _NON_ASCII.sub(lambda match: quote(match.group(), safe=""), text)


def _ascii_host(host: str) -> str:
    """Return host as the ASCII name a resolver looks up, raising ValueError when it has none.

    This is the stdlib `idna` codec (IDNA2003: nameprep, i.e. NFKC and case folding, and the
    separators U+3002, U+FF0E, U+FF61 read as dots), chosen over a hand-made UTS #46 mapping
    because it is what socket, ssl and http.client apply to a str host anyway: the name checked
    is the name looked up. Its one difference from browsers' UTS #46, deviation characters
    (faß.de becomes fass.de), is visible, since the stored url is this ASCII form.
    """
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError as exc:
        raise ValueError(f"host {host!r} is not a valid domain name: {exc}") from None


def normalise(url: str) -> str:
    """Return url in the ASCII form delivery sends (IDNA host, UTF-8 percent-encoding); ValueError if it has none."""
    if _UNSENDABLE.search(url):
        raise ValueError("URL contains a control character or a space")
    # urlsplit raises ValueError on a bad IPv6 literal or a netloc that NFKC turns into delimiters.
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.hostname:
        userinfo, at, hostport = netloc.rpartition("@")
        # urlsplit has already checked a bracketed host is an IPv6 address; only names need IDNA.
        host = f"[{parts.hostname}]" if hostport.startswith("[") else _ascii_host(parts.hostname)
        port = parts.port  # raises ValueError on a bad port
        netloc = _percent_encode(userinfo) + at + host + ("" if port is None else f":{port}")
    return urlunsplit((parts.scheme, netloc, *(_percent_encode(part) for part in (parts.path, parts.query, parts.fragment))))


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
        normal = normalise(url)
        parts = urlsplit(normal)
        host = parts.hostname or ""
    except ValueError:
        return "must be a valid URL"
    if parts.scheme != "https":
        return "must start with https://"
    if not host:
        return "must be a valid URL"
    if parts.username is not None or parts.password is not None:
        return "must not contain credentials"
    if _is_ip_literal(host):
        return "must not be an IP address"
    if len(normal) > MAX_LENGTH:
        return f"must not be greater than {MAX_LENGTH} characters"
    name = host.rstrip(".")
    if any(name == suffix or name.endswith("." + suffix) for suffix in _NOT_PUBLIC):
        return None if allow_private else "must be a public domain name"
    labels = name.split(".")
    if not all(_LABEL.match(label) for label in labels):
        return "must be a valid URL"
    if len(labels) < 2:
        return "must be a public domain name"
    return None
