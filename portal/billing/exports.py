"""Downloads of a chargeback :class:`~portal.billing.report.Report`: CSV, Excel and PDF. Pure: a report in,
bytes out; the same report gives the same bytes.

**The table.** All three formats show the same rows, in this order: one ``line`` per group (as the report
sorts them), one ``adjustment`` per correction booked to this period, a ``platform`` row with the
unallocated capacity cost nobody was charged for (full recovery only, and then always, zero or not), and a
``total`` row. The total row holds the lines' GPU-hours and held cost (``report.gpu_hours``,
``report.held_cost``), the platform cost (the lines' spread shares plus the platform row) and the grand
total ``report.total``, which also counts the adjustments.

**CSV** (UTF-8, no BOM, RFC 4180 quoting, one header row) has these columns, every row carrying the
report's context so that each row stands alone and ``csv.DictReader`` needs nothing else::

    section, key, label, cost_centre,
    gpu_hours, used_gpu_hours, idle_gpu_hours, measured_gpu_hours,   hours, 4 dp
    used_share, idle_share,                                          fractions of gpu_hours, 4 dp
    held_cost, platform_cost, total,                                 money, 2 dp
    period_start, period_end, group, mode, spread, currency          ISO 8601 in the billing zone; true/false

Figures are the report's decimals written as decimal strings (never through a float); a figure that does not
apply to a row (a share of nothing held, the platform row's hours) is empty.

**Formula injection.** Spreadsheets run a cell that begins with ``=``, ``+``, ``-`` or ``@`` (and some a
leading tab or carriage return) as a formula, and keys, labels and cost centres are names people type. In
CSV and Excel such a text gets a leading apostrophe (``'=cmd``), which spreadsheets show as text. Numbers
are never touched: a credit's ``-12.00`` stays a number.

**Excel** has three sheets: "Chargeback" (the table, numbers as numbers with currency formats), "GPU
models" (capacity against what was held, per model) and "Notes" (the period, grouping, mode, currency and
the report's notes).

**PDF** is A4: the summary, a bar chart of the largest lines' cost, a stacked bar of held against
unallocated GPU-hours per model, the table (the largest lines, the rest as one row), the models and the
notes. It draws with DejaVu Sans where the host has it (wide Unicode coverage), else with Bitstream Vera,
which ships with reportlab.

**Determinism.** Excel: the workbook's created/modified times are the period's end, and the zip is
rewritten with one fixed timestamp per member (openpyxl stamps them with the current time). PDF:
reportlab's invariant mode fixes the creation date and the document ID.
"""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from openpyxl import Workbook  # type: ignore[import-untyped]
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE  # type: ignore[import-untyped]
from openpyxl.styles import Font  # type: ignore[import-untyped]
from openpyxl.utils import get_column_letter  # type: ignore[import-untyped]
from openpyxl.writer.excel import ExcelWriter  # type: ignore[import-untyped]
from reportlab.graphics.charts.barcharts import (  # type: ignore[import-untyped]
    HorizontalBarChart,
    VerticalBarChart,
)
from reportlab.graphics.charts.legends import Legend  # type: ignore[import-untyped]
from reportlab.graphics.shapes import Drawing  # type: ignore[import-untyped]
from reportlab.lib import colors  # type: ignore[import-untyped]
from reportlab.lib.enums import TA_LEFT, TA_RIGHT  # type: ignore[import-untyped]
from reportlab.lib.pagesizes import A4  # type: ignore[import-untyped]
from reportlab.lib.styles import ParagraphStyle  # type: ignore[import-untyped]
from reportlab.lib.units import mm  # type: ignore[import-untyped]
from reportlab.pdfbase import pdfmetrics  # type: ignore[import-untyped]
from reportlab.pdfbase.ttfonts import TTFont  # type: ignore[import-untyped]
from reportlab.platypus import (  # type: ignore[import-untyped]
    KeepTogether,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from portal.billing import periods
from portal.billing.ledger import zone
from portal.billing.report import Line, Mode, ModelLine, Report, cents, hours

ZERO = Decimal(0)
SHARE = Decimal("0.0001")

# -- the table ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One row of the exported table; None where a figure does not apply."""

    section: str  # "line", "adjustment", "platform" or "total"
    key: str
    label: str
    cost_centre: str
    total: Decimal
    gpu_hours: Decimal | None = None
    used_gpu_hours: Decimal | None = None
    idle_gpu_hours: Decimal | None = None
    measured_gpu_hours: Decimal | None = None
    held_cost: Decimal | None = None
    platform_cost: Decimal | None = None

    @property
    def used_share(self) -> Decimal | None:
        return _share(self.used_gpu_hours, self.gpu_hours)

    @property
    def idle_share(self) -> Decimal | None:
        return _share(self.idle_gpu_hours, self.gpu_hours)


def _share(part: Decimal | None, whole: Decimal | None) -> Decimal | None:
    # From the decimals, not Line.used_share's float, so that the 4 dp are exact.
    if part is None or not whole:
        return None
    return (part / whole).quantize(SHARE, rounding=ROUND_HALF_UP)


# (CSV name, heading, kind): the one column list every format follows.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("section", "Section", "text"),
    ("key", "Key", "text"),
    ("label", "Label", "text"),
    ("cost_centre", "Cost centre", "text"),
    ("gpu_hours", "GPU-hours", "hours"),
    ("used_gpu_hours", "Used GPU-hours", "hours"),
    ("idle_gpu_hours", "Idle GPU-hours", "hours"),
    ("measured_gpu_hours", "Measured GPU-hours", "hours"),
    ("used_share", "Used share", "share"),
    ("idle_share", "Idle share", "share"),
    ("held_cost", "Held cost", "money"),
    ("platform_cost", "Platform share", "money"),
    ("total", "Total", "money"),
)
CONTEXT_COLUMNS = ("period_start", "period_end", "group", "mode", "spread", "currency")

PLATFORM_KEY = "unallocated"
PLATFORM_LABEL = "Unallocated capacity"


def _line_row(section: str, line: Line) -> Row:
    return Row(
        section=section,
        key=line.key,
        label=line.label,
        cost_centre=line.cost_centre,
        gpu_hours=line.gpu_hours,
        used_gpu_hours=line.used_gpu_hours,
        idle_gpu_hours=line.idle_gpu_hours,
        measured_gpu_hours=line.measured_gpu_hours,
        held_cost=line.cost,
        platform_cost=line.platform_cost,
        total=line.total,
    )


def _summed(lines: Sequence[Line], section: str, key: str, label: str) -> Row:
    def total(figure: Callable[[Line], Decimal]) -> Decimal:
        return sum((figure(line) for line in lines), ZERO)

    return Row(
        section=section,
        key=key,
        label=label,
        cost_centre="",
        gpu_hours=total(lambda line: line.gpu_hours),
        used_gpu_hours=total(lambda line: line.used_gpu_hours),
        idle_gpu_hours=total(lambda line: line.idle_gpu_hours),
        measured_gpu_hours=total(lambda line: line.measured_gpu_hours),
        held_cost=total(lambda line: line.cost),
        platform_cost=total(lambda line: line.platform_cost),
        total=total(lambda line: line.total),
    )


def _platform_row(report: Report) -> Row | None:
    if report.mode != Mode.FULL and not report.unallocated_cost:
        return None
    cost = report.unallocated_cost
    return Row("platform", PLATFORM_KEY, PLATFORM_LABEL, "", total=cost, platform_cost=cost)


def _total_row(report: Report) -> Row:
    row = _summed(report.lines, "total", "", "Total")
    platform = (row.platform_cost or ZERO) + report.unallocated_cost
    return replace(row, platform_cost=platform, total=report.total)


def rows(report: Report, *, top: int | None = None) -> list[Row]:
    """The table; with ``top``, the lines past the first ``top`` become one "Other" line."""
    lines = [_line_row("line", line) for line in report.lines]
    if top is not None and len(report.lines) > top:
        rest = report.lines[top:]
        lines = [*lines[:top], _summed(rest, "line", "", f"Other ({len(rest)} lines)")]
    adjustments = [_line_row("adjustment", line) for line in report.adjustments]
    platform = _platform_row(report)
    return [*lines, *adjustments, *([platform] if platform else []), _total_row(report)]


def _figure(row: Row, name: str) -> Any:
    return getattr(row, name)


# -- text and numbers ---------------------------------------------------------------------------------

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_text(text: str) -> str:
    """A text a spreadsheet will not run as a formula (see the module docstring)."""
    return f"'{text}" if text.startswith(_FORMULA_STARTS) else text


def _plain(value: Decimal | None, kind: str) -> str:
    """A figure as an exact decimal string of its kind's places; empty for None."""
    if value is None:
        return ""
    if kind == "money":
        return str(cents(value))
    if kind == "hours":
        return str(hours(value))
    return str(value.quantize(SHARE, rounding=ROUND_HALF_UP))


def _local(moment: datetime) -> datetime:
    return moment.astimezone(zone())


def _context(report: Report) -> dict[str, str]:
    return {
        "period_start": _local(report.start).isoformat(),
        "period_end": _local(report.end).isoformat(),
        "group": report.group,
        "mode": report.mode,
        "spread": "true" if report.spread else "false",
        "currency": report.currency,
    }


def filename(report: Report, extension: str) -> str:
    """``chargeback-<period>-<group>-<mode>[-spread].<extension>``; the period is ``YYYY-MM`` for exactly
    one calendar month in the billing zone, else ``YYYY-MM-DD_YYYY-MM-DD`` from the first day to the last
    day the period touches (the end is exclusive: a period ending at midnight ends the day before)."""
    tz = zone()
    month = periods.month_of(report.start, tz)
    if (report.start, report.end) == periods.month_bounds(month, tz):
        period = f"{month:%Y-%m}"
    else:
        last = _local(max(report.end - timedelta(microseconds=1), report.start))
        period = f"{_local(report.start):%Y-%m-%d}_{last:%Y-%m-%d}"
    mode = f"{report.mode}-spread" if report.spread else report.mode
    return f"chargeback-{period}-{report.group}-{mode}.{extension.lstrip('.')}"


# -- CSV ----------------------------------------------------------------------------------------------


def to_csv(report: Report) -> bytes:
    """The table as UTF-8 CSV, the report's context on every row (layout: the module docstring)."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    writer.writerow([name for name, _, _ in COLUMNS] + list(CONTEXT_COLUMNS))
    context = list(_context(report).values())
    for row in rows(report):
        cells = [
            safe_text(_figure(row, name)) if kind == "text" else _plain(_figure(row, name), kind)
            for name, _, kind in COLUMNS
        ]
        writer.writerow(cells + context)
    return out.getvalue().encode("utf-8")


# -- Excel --------------------------------------------------------------------------------------------

# Any fixed instant would do; the zip format cannot hold one before 1980.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_HOURS_FORMAT = "#,##0.0000"
_SHARE_FORMAT = "0.0%"
_BOLD = Font(bold=True)


def _money_format(currency: str) -> str:
    code = currency.replace('"', "")
    return f'#,##0.00 "{code}";-#,##0.00 "{code}"'


def _cell_text(text: str) -> str:
    # openpyxl refuses control characters (they are not valid XML), and takes "=..." as a formula.
    return safe_text(ILLEGAL_CHARACTERS_RE.sub("", text))


def _sheet(workbook: Any, title: str, headings: Sequence[str], widths: Sequence[int]) -> Any:
    sheet = workbook.create_sheet(title)
    sheet.append(list(headings))
    for cell in sheet[1]:
        cell.font = _BOLD
    sheet.freeze_panes = "A2"
    for index, width in enumerate(widths):
        sheet.column_dimensions[get_column_letter(index + 1)].width = width
    return sheet


def _append(sheet: Any, values: Sequence[Any], formats: Sequence[str | None], *, bold: bool = False) -> None:
    sheet.append([_cell_text(v) if isinstance(v, str) else v for v in values])
    # The row just appended, by its own cells: sheet[sheet.max_row] scans every cell, quadratic in the rows.
    row = sheet._current_row
    cells = [sheet.cell(row=row, column=column) for column in range(1, len(values) + 1)]
    for cell, number_format in zip(cells, formats, strict=True):
        if number_format:
            cell.number_format = number_format
        if bold:
            cell.font = _BOLD


def _chargeback_sheet(workbook: Any, report: Report) -> None:
    formats = {"text": None, "hours": _HOURS_FORMAT, "share": _SHARE_FORMAT, "money": _money_format(report.currency)}
    widths = [11, 18, 36, 14] + [14] * (len(COLUMNS) - 4)
    sheet = _sheet(workbook, "Chargeback", [heading for _, heading, _ in COLUMNS], widths)
    for row in rows(report):
        values = [_figure(row, name) for name, _, _ in COLUMNS]
        _append(sheet, values, [formats[kind] for _, _, kind in COLUMNS], bold=row.section == "total")


_MODEL_HEADINGS = (
    "GPU model",
    "Capacity GPU-hours",
    "Capacity cost",
    "Held GPU-hours",
    "Held cost",
    "Unallocated GPU-hours",
    "Unallocated cost",
    "Spread cost",
    "Allocated share",
)


def _model_values(model: ModelLine) -> list[Any]:
    return [
        model.gpu_model,
        model.capacity_gpu_hours,
        model.capacity_cost,
        model.held_gpu_hours,
        model.held_cost,
        model.unallocated_gpu_hours,
        model.unallocated_cost,
        model.spread_cost,
        _share(model.held_gpu_hours, model.capacity_gpu_hours),
    ]


def _models_total(models: Sequence[ModelLine]) -> ModelLine:
    def total(figure: Callable[[ModelLine], Decimal]) -> Decimal:
        return sum((figure(m) for m in models), ZERO)

    return ModelLine(
        gpu_model="Total",
        capacity_gpu_hours=total(lambda m: m.capacity_gpu_hours),
        capacity_cost=total(lambda m: m.capacity_cost),
        held_gpu_hours=total(lambda m: m.held_gpu_hours),
        held_cost=total(lambda m: m.held_cost),
        spread_cost=total(lambda m: m.spread_cost),
    )


def _models_sheet(workbook: Any, report: Report) -> None:
    money = _money_format(report.currency)
    hours_, share = _HOURS_FORMAT, _SHARE_FORMAT
    formats = [None, hours_, money, hours_, money, hours_, money, money, share]
    sheet = _sheet(workbook, "GPU models", _MODEL_HEADINGS, [22] + [16] * 8)
    for model in report.models:
        _append(sheet, _model_values(model), formats)
    _append(sheet, _model_values(_models_total(report.models)), formats, bold=True)


def _notes_sheet(workbook: Any, report: Report) -> None:
    sheet = _sheet(workbook, "Notes", ["Item", "Value"], [16, 100])
    for name, value in _context(report).items():
        _append(sheet, [name.replace("_", " ").capitalize(), value], [None, None])
    _append(sheet, ["Time zone", zone().key], [None, None])
    for note in report.notes or ["No notes."]:
        _append(sheet, ["Note", note], [None, None])


def _fixed_zip(data: bytes) -> bytes:
    """The same archive, members in the same order, each stamped with one fixed time."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for member in source.infolist():
            entry = zipfile.ZipInfo(member.filename, date_time=_ZIP_TIME)
            entry.external_attr = 0o600 << 16  # what ZipFile.writestr gives a name: rw for the owner
            entry.create_system = 3  # Unix, wherever this runs
            target.writestr(entry, source.read(member), compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


def to_xlsx(report: Report) -> bytes:
    """The table, the models and the notes as an Excel workbook (sheets: the module docstring)."""
    workbook = Workbook()
    workbook.remove(workbook.active)
    _chargeback_sheet(workbook, report)
    _models_sheet(workbook, report)
    _notes_sheet(workbook, report)
    stamp = report.end.astimezone(UTC).replace(tzinfo=None)  # openpyxl takes naive UTC
    workbook.properties.created = workbook.properties.modified = stamp
    workbook.properties.creator = "GPU workspace portal"
    workbook.properties.title = filename(report, "xlsx")
    buffer = io.BytesIO()
    # ExcelWriter rather than Workbook.save, which stamps "modified" with the current time.
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        ExcelWriter(workbook, archive).write_data()
    return _fixed_zip(buffer.getvalue())


# -- PDF ----------------------------------------------------------------------------------------------

_FONT, _BOLD_FONT = "ExportSans", "ExportSans-Bold"
_DEJAVU = Path("/usr/share/fonts/truetype/dejavu")
_PAGE_WIDTH = A4[0] - 30 * mm  # inside the margins
_TOP_LINES_CHART = 10
_TOP_LINES_TABLE = 25
_HELD, _UNALLOCATED, _LINE = colors.HexColor("#2f6fb0"), colors.HexColor("#c9d3df"), colors.HexColor("#e6e9ee")


@cache
def _fonts() -> None:
    """Register the PDF fonts once per process."""
    regular, bold = _DEJAVU / "DejaVuSans.ttf", _DEJAVU / "DejaVuSans-Bold.ttf"
    if not (regular.is_file() and bold.is_file()):
        regular, bold = Path("Vera.ttf"), Path("VeraBd.ttf")  # found on reportlab's own font path
    pdfmetrics.registerFont(TTFont(_FONT, str(regular)))
    pdfmetrics.registerFont(TTFont(_BOLD_FONT, str(bold)))
    pdfmetrics.registerFontFamily(_FONT, normal=_FONT, bold=_BOLD_FONT, italic=_FONT, boldItalic=_BOLD_FONT)


def _style(size: float, *, bold: bool = False, space: float = 0, align: int = TA_LEFT) -> Any:
    name = f"export-{size}-{bold}-{align}"
    font = _BOLD_FONT if bold else _FONT
    return ParagraphStyle(name, fontName=font, fontSize=size, leading=size * 1.25, spaceAfter=space, alignment=align)


def _money(value: Decimal, currency: str = "") -> str:
    text = f"{cents(value):,}"
    return f"{text} {currency}" if currency else text


def _hours_text(value: Decimal | None) -> str:
    return "" if value is None else f"{hours(value):,.1f}"


def _percent(value: Decimal | None) -> str:
    return "" if value is None else f"{value * 100:.1f}%"


def _para(text: str, style: Any) -> Any:
    return Paragraph(escape(text), style)


def _period_text(report: Report) -> str:
    start, end = _local(report.start), _local(report.end)
    return f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} ({zone().key}, end exclusive)"


def _summary(report: Report, title: str) -> list[Any]:
    mode = "full recovery" if report.mode == Mode.FULL else report.mode
    if report.spread:
        mode += ", unallocated cost spread over the groups"
    facts = [
        ("Period", _period_text(report)),
        ("Grouped by", report.group.replace("_", " ")),
        ("Mode", mode),
        ("Currency", report.currency),
        ("Total", _money(report.total, report.currency)),
    ]
    body = _style(9)
    return [
        _para(title, _style(16, bold=True, space=4)),
        *(Paragraph(f"<b>{escape(name)}:</b> {escape(value)}", body) for name, value in facts),
        Spacer(1, 4 * mm),
    ]


def _heading(text: str) -> Any:
    return _para(text, _style(11, bold=True, space=3))


def _top_totals(report: Report) -> list[tuple[str, Decimal]]:
    """The largest lines by total cost, the rest summed as "Other"."""
    top = [(line.label, line.total) for line in report.lines[:_TOP_LINES_CHART]]
    rest = report.lines[_TOP_LINES_CHART:]
    if rest:
        top.append(("Other", sum((line.total for line in rest), ZERO)))
    return top


def _short(text: str, size: int = 32) -> str:
    return text if len(text) <= size else text[: size - 1] + "\u2026"


def _cost_chart(report: Report) -> Any:
    bars = list(reversed(_top_totals(report)))  # the chart draws its first bar lowest; the largest goes on top
    height = 30 + 16 * len(bars)
    drawing = Drawing(_PAGE_WIDTH, height)
    chart = HorizontalBarChart()
    chart.x, chart.y, chart.width, chart.height = 150, 20, _PAGE_WIDTH - 220, height - 30
    chart.data = [[float(total) for _, total in bars]]  # positions on a drawing; the figures are labels
    chart.barLabelFormat = "values"
    chart.barLabelArray = [[_money(total) for _, total in bars]]
    chart.barLabels.boxAnchor, chart.barLabels.dx = "w", 3
    chart.barLabels.fontName, chart.barLabels.fontSize = _FONT, 7
    chart.bars[0].fillColor, chart.bars[0].strokeColor = _HELD, None
    chart.categoryAxis.categoryNames = [_short(label) for label, _ in bars]
    chart.categoryAxis.labels.boxAnchor, chart.categoryAxis.labels.dx = "e", -4
    chart.categoryAxis.labels.fontName, chart.categoryAxis.labels.fontSize = _FONT, 7
    chart.valueAxis.valueMin = min(0.0, *chart.data[0])
    chart.valueAxis.labels.fontName, chart.valueAxis.labels.fontSize = _FONT, 7
    drawing.add(chart)
    return drawing


def _models_chart(report: Report) -> Any:
    models = report.models
    drawing = Drawing(_PAGE_WIDTH, 190)
    chart = VerticalBarChart()
    chart.x, chart.y, chart.width, chart.height = 50, 45, _PAGE_WIDTH - 170, 135
    # More held than seen (a ledger gap, see the notes) draws as no unallocated bar, not a negative one.
    chart.data = [
        [float(m.held_gpu_hours) for m in models],
        [float(max(m.unallocated_gpu_hours, ZERO)) for m in models],
    ]
    chart.categoryAxis.style = "stacked"
    chart.categoryAxis.categoryNames = [_short(m.gpu_model, 20) for m in models]
    chart.categoryAxis.labels.fontName, chart.categoryAxis.labels.fontSize = _FONT, 7
    chart.categoryAxis.labels.boxAnchor, chart.categoryAxis.labels.angle = "ne", 30
    chart.categoryAxis.labels.dy = -2
    chart.valueAxis.valueMin = 0
    chart.valueAxis.labels.fontName, chart.valueAxis.labels.fontSize = _FONT, 7
    for index, colour in enumerate((_HELD, _UNALLOCATED)):
        chart.bars[index].fillColor, chart.bars[index].strokeColor = colour, None
    legend = Legend()
    legend.x, legend.y, legend.alignment = _PAGE_WIDTH - 105, 160, "right"
    legend.fontName, legend.fontSize = _FONT, 7
    legend.colorNamePairs = [(_HELD, "Held GPU-hours"), (_UNALLOCATED, "Unallocated GPU-hours")]
    drawing.add(chart)
    drawing.add(legend)
    return drawing


def _charts(report: Report) -> list[Any]:
    body = _style(9, space=4)
    if any(line.total for line in report.lines):
        lines: list[Any] = [_heading("Cost per line"), _cost_chart(report)]
    else:
        lines = [_heading("Cost per line"), _para("No GPU use was charged in this period.", body)]
    if any(m.capacity_gpu_hours or m.held_gpu_hours for m in report.models):
        models: list[Any] = [_heading("GPU-hours per model"), _models_chart(report)]
    else:
        models = [_heading("GPU-hours per model"), _para("No GPU capacity or use was recorded.", body)]
    return [KeepTogether(lines), Spacer(1, 3 * mm), KeepTogether(models), Spacer(1, 3 * mm)]


def _table(headings: Sequence[str], body: Sequence[Sequence[str]], widths: Sequence[float], texts: int) -> Any:
    """A table whose first ``texts`` columns are wrapped, escaped text and the rest right-aligned figures; the
    last row is the total, in bold."""
    left, right = _style(7.5, bold=True), _style(7.5, bold=True, align=TA_RIGHT)
    head = [_para(h, left if i < texts else right) for i, h in enumerate(headings)]
    cell = [_style(7.5)] * (len(body) - 1) + [left]
    data = [head] + [[_para(v, cell[r]) if i < texts else v for i, v in enumerate(row)] for r, row in enumerate(body)]
    table = Table(data, colWidths=list(widths), repeatRows=1)
    style = [
        ("FONT", (0, 0), (-1, -1), _FONT, 7.5),
        ("FONT", (0, -1), (-1, -1), _BOLD_FONT, 7.5),
        ("ALIGN", (texts, 0), (-1, -1), "RIGHT"),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LINEBELOW", (0, 0), (-1, 0), 0.6, colors.black),
        ("LINEBELOW", (0, 1), (-1, -1), 0.25, _LINE),
    ]
    table.setStyle(TableStyle(style))
    return table


def _lines_table(report: Report) -> Any:
    body = []
    for row in rows(report, top=_TOP_LINES_TABLE):
        label = row.label if row.section in ("line", "total") else f"{row.label} ({row.section})"
        money = [_money(v) if v is not None else "" for v in (row.held_cost, row.platform_cost, row.total)]
        body.append([label, row.cost_centre, _hours_text(row.gpu_hours), _percent(row.used_share), *money])
    headings = ["Line", "Cost centre", "GPU-hours", "Used", "Held cost", "Platform share", "Total"]
    return _table(headings, body, [_PAGE_WIDTH - 355, 70, 60, 40, 62, 58, 65], texts=2)


def _models_table(report: Report) -> Any:
    body = [
        [
            m.gpu_model,
            _hours_text(m.capacity_gpu_hours),
            _money(m.capacity_cost),
            _hours_text(m.held_gpu_hours),
            _money(m.held_cost),
            _hours_text(m.unallocated_gpu_hours),
            _money(m.unallocated_cost),
            _percent(_share(m.held_gpu_hours, m.capacity_gpu_hours)),
        ]
        for m in [*report.models, _models_total(report.models)]
    ]
    headings = ["GPU model", "Capacity GPU-hours", "Capacity cost", "Held GPU-hours", "Held cost"]
    headings += ["Unallocated GPU-hours", "Unallocated cost", "Allocated"]
    widths = [62, 62, 62, 62, 64, 64, 54]  # each heading word fits a line (cells pad 6 pt a side)
    return _table(headings, body, [_PAGE_WIDTH - sum(widths), *widths], texts=1)


def _notes(report: Report) -> list[Any]:
    body = _style(8.5, space=2)
    notes = report.notes or ["No notes."]
    return [_heading("Notes"), *(_para(f"\u2022 {note}", body) for note in notes)]


def _footer(title: str) -> Callable[[Any, Any], None]:
    def draw(canvas: Any, doc: Any) -> None:
        canvas.saveState()
        canvas.setFont(_FONT, 7)
        canvas.drawString(15 * mm, 10 * mm, title)
        canvas.drawRightString(A4[0] - 15 * mm, 10 * mm, f"Page {doc.page}")
        canvas.restoreState()

    return draw


def to_pdf(report: Report, *, title: str) -> bytes:
    """An A4 PDF of the report: summary, charts, the table, the models and the notes."""
    _fonts()
    buffer = io.BytesIO()
    doc = SimpleDocTemplate(
        buffer,
        pagesize=A4,
        leftMargin=15 * mm,
        rightMargin=15 * mm,
        topMargin=15 * mm,
        bottomMargin=18 * mm,
        title=title,
        author="GPU workspace portal",
        subject=filename(report, "pdf"),
        invariant=1,  # a fixed creation date and document ID: the same report, the same bytes
    )
    story = [
        *_summary(report, title),
        *_charts(report),
        _heading("Chargeback"),
        _lines_table(report),
        Spacer(1, 5 * mm),
        _heading("GPU models"),
        _models_table(report),
        Spacer(1, 5 * mm),
        *_notes(report),
    ]
    footer = _footer(title)
    doc.build(story, onFirstPage=footer, onLaterPages=footer)
    return buffer.getvalue()


__all__ = ["COLUMNS", "CONTEXT_COLUMNS", "Row", "filename", "rows", "safe_text", "to_csv", "to_pdf", "to_xlsx"]
