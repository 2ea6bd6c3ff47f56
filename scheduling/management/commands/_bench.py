"""What the benchmark commands share: options to a scenario, the run with its refusals, --keep and --json."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduling.benchmarks.chargeback import BenchError

S = TypeVar("S")


class Figures(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Figures)


def add_common_arguments(parser: CommandParser) -> None:
    parser.add_argument("--keep", action="store_true", help="commit the generated rows instead of rolling back")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")


def scenario_from(cls: type[S], options: dict[str, Any]) -> S:
    """The scenario dataclass with every field its option names."""
    return cls(**{f.name: options[f.name] for f in dataclasses.fields(cls) if f.name in options})  # type: ignore[arg-type]


def run(
    command: BaseCommand,
    benchmark: Callable[..., R],
    scenario: object,
    options: dict[str, Any],
    show: Callable[[R], None],
) -> None:
    try:
        result = benchmark(scenario, keep=options["keep"], progress=command.stderr.write)
    except BenchError as exc:
        raise CommandError(str(exc)) from exc
    show(result)
    if options["keep"]:
        command.stdout.write("the generated rows were kept (--keep)")
    if options["json"]:
        options["json"].write_text(json.dumps(result.as_dict(), indent=2))
