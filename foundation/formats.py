"""One line format for every logger of a process `riskapi` runs: the request lines' (api.access_log).

Text: time, logger, then `key=value` pairs: a request's or an attempt's fields, or a record's level and
message (quoted when not one plain word; a traceback too, on the same line). JSON (RISKAPI_LOG_FORMAT=json):
one object per line with time, level, logger and the same fields. Nothing here imports prometheus_client,
which `serve` must not load before it has set PROMETHEUS_MULTIPROC_DIR.
"""

import functools
import json
import logging
import re
import sys
import time


class _Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        time_ = _utc(record) + f".{int(record.msecs):03d}Z"
        line = {"time": time_, "level": record.levelname, "logger": record.name}
        line.update(_fields(self, record))
        return json.dumps(line, separators=(",", ":"), default=str)


class _Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        pairs = " ".join(f"{key}={_text(value)}" for key, value in _fields(self, record).items())
        return f"{_utc(record)}Z {record.name} {pairs}"


def _utc(record: logging.LogRecord) -> str:
    """Return when a record was made, in UTC, to the second."""
    return _second(int(record.created))


@functools.lru_cache(maxsize=4)  # a busy process writes many lines a second: strftime once for them all
def _second(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def _fields(formatter: logging.Formatter, record: logging.LogRecord) -> dict:
    """Return a record's fields: a request's or an attempt's own, else its level and message (and traceback)."""
    fields = getattr(record, "fields", None)
    if fields:
        return fields  # read, never changed, by the formatters
    found: dict = {"level": record.levelname, "message": record.getMessage()}
    if record.exc_info:
        found["traceback"] = formatter.formatException(record.exc_info)
    return found


def _text(value: object) -> str:
    """Return a value as it stands in a text line: bare when it is one plain word, else quoted (one line)."""
    text = str(value)
    return text if text and not _QUOTED.search(text) else json.dumps(text)


# What a bare value may not hold: it would read as another pair, or another line.
_QUOTED = re.compile(r'[ "=\\\n\t]')


def _handler(log_format: str) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Json() if log_format == "json" else _Text())
    return handler


def setup(log_format: str) -> None:
    """Give every logger of this process one line format (the request lines'): text, or JSON (`json`), on stderr.

    Called first thing by each process `riskapi` runs (serve, its API processes, worker); warnings and up.
    """
    root = logging.getLogger()
    root.handlers[:] = [_handler(log_format)]
    root.setLevel(logging.WARNING)
    # uvicorn's loggers come with handlers (and a format) of their own: theirs go through the root's too.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    # A library's warnings.warn (RQ's "CLIENT LIST command not supported", say) would print two bare
    # lines of its own; captured, it is one line of the logger py.warnings, in the same format.
    logging.captureWarnings(True)


def configure(log_format: str, logger: logging.Logger) -> None:
    """Send a logger's lines (requests, or delivery attempts) to stderr, as JSON (`json`) or readable text."""
    logger.handlers[:] = [_handler(log_format)]
    logger.setLevel(logging.INFO)
    logger.propagate = False


__all__ = ["configure", "setup"]
