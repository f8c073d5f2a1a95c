"""Secrets never leave the process: one redaction that every error path and log handler uses.

A GitHub token is only ever placed in the Authorization header. A server may still echo it (a 401
body quoting the request's headers), so error text and log records are scrubbed of the configured
token and of anything shaped like a GitHub token before they reach a file or a terminal."""
import logging
import os
import re

TOKEN_SHAPES = re.compile(r"\b(gh[pousr]_[A-Za-z0-9_]{8,}|github_pat_[A-Za-z0-9_]{8,})")
MASK = "[token redacted]"


def redact(text, secrets=()):
    text = str(text)
    for secret in (*secrets, os.environ.get("GITHUB_TOKEN", "")):
        if secret and len(secret) >= 8:
            text = text.replace(secret, MASK)
    return TOKEN_SHAPES.sub(MASK, text)


class RedactingFilter(logging.Filter):
    """Scrubs every record that passes a handler or logger it is attached to."""

    def __init__(self, secrets=()):
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record):
        message = record.getMessage()
        clean = redact(message, self.secrets)
        if clean != message:
            record.msg, record.args = clean, ()
        return True
