"""The API's JSON parser: refuses bodies nested deeper than any request needs, and NUL characters.

Python's JSON decoder recurses once per level, so a body of 100,000 brackets raised RecursionError (a 500);
bodies just under the interpreter's limit parse, then recurse again in DRF's fields and the JSON encoder.
PostgreSQL text and jsonb cannot hold NUL, so a NUL anywhere in a body was a 500 at save time."""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

MAX_DEPTH = 32  # the deepest request (a node selector in an offering) nests 3 levels


def refusal(data: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``data`` (parsed JSON) may not be accepted, or None. Iterative, so depth cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return "JSON strings may not contain NUL (\\u0000) characters."
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > max_depth:
            return f"JSON nested deeper than {max_depth} levels is not accepted."
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        stack.extend((item, depth + 1) for item in items)
    return None


class SafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        parse_constant = json.strict_constant if self.strict else None
        try:
            data = json.load(codecs.getreader(encoding)(stream), parse_constant=parse_constant)  # type: ignore[arg-type]
        except RecursionError:
            raise ParseError(f"JSON nested deeper than {MAX_DEPTH} levels is not accepted.") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if problem := refusal(data):
            raise ParseError(problem)
        return data
