"""The one exception of single sign-on: a sign-in refused, with the sentence shown on the login page."""

from __future__ import annotations


class SsoRefused(Exception):
    """A sign-in through the provider that the portal refuses. ``message`` is for the person signing in."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail  # for the log only: may name keys, claims or the provider's answer
