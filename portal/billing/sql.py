"""SQL the ORM does not spell the same on every database: seconds between two timestamps."""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Expression, FloatField, Func
from django.db.models.expressions import Combinable
from django.db.models.sql.compiler import SQLCompiler


class Seconds(Func):
    """``end - start`` in seconds, as a float (PostgreSQL: EXTRACT EPOCH; SQLite: julianday)."""

    output_field = FloatField()

    def __init__(self, end: Expression | Combinable | str, start: Expression | Combinable | str, **extra: Any) -> None:
        super().__init__(end, start, **extra)

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="EXTRACT(EPOCH FROM (%(expressions)s))::float8", arg_joiner=" - ", **extra
        )

    def as_sqlite(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        return self.as_sql(
            compiler,
            connection,
            template="((julianday(%(expressions)s)) * 86400.0)",
            arg_joiner=") - julianday(",
            **extra,
        )
