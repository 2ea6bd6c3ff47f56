"""Serve plotly's JavaScript from the installed plotly package as ``vendor/plotly.min.js``.

Charts must work offline, and the bundle must match the Python package that builds the figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, overload

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

STATIC_PATH = "vendor/plotly.min.js"
_BUNDLE = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(_BUNDLE.parent))

    def check(self, **kwargs: Any) -> list[Any]:
        return []

    @overload
    def find(self, path: str, find_all: Literal[False] = False) -> str | None: ...
    @overload
    def find(self, path: str, find_all: Literal[True]) -> list[str]: ...
    def find(self, path: str, find_all: bool = False) -> str | list[str] | None:
        if path == STATIC_PATH and _BUNDLE.exists():
            return [str(_BUNDLE)] if find_all else str(_BUNDLE)
        return [] if find_all else None

    def list(self, ignore_patterns: Any) -> Any:
        if _BUNDLE.exists():
            storage = _PrefixedStorage(location=str(_BUNDLE.parent))
            yield _BUNDLE.name, storage


class _PrefixedStorage(FileSystemStorage):
    # collectstatic places each listed file under storage.prefix.
    prefix = "vendor"
