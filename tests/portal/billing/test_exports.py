"""Chargeback downloads: CSV, Excel and PDF read back to the report's own figures, and the same report gives
the same bytes. Reports are built by hand: no database."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import zipfile
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import openpyxl  # type: ignore[import-untyped]
import pytest
from PIL import Image, ImageChops
from pytest_django.fixtures import SettingsWrapper

from portal.billing import exports
from portal.billing.report import Line, Mode, ModelLine, Report, cents, hours, spread

MARCH = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
ODD = 'Équipe Données, "R&D" \u2013 Zürich'  # a comma, quotes, non-ASCII (an en dash)
EVIL = '=HYPERLINK("http://x","y")'
D = Decimal


def _lines(count: int = 15) -> list[Line]:
    """Plausible lines, figures made the way the report makes them (hours to 4 dp, money to the cent)."""
    lines = []
    for i in range(count):
        held = hours(D(900) / (i + 1) + D("0.33333"))
        lines.append(
            Line(
                key=f"team-{i}",
                label={3: ODD, 7: EVIL}.get(i, f"Team {i}"),
                cost_centre=f"CC-{i % 4}",
                gpu_hours=held,
                cost=cents(held * D("3.85")),
                used_gpu_hours=hours(held * D("0.61")),
                idle_gpu_hours=hours(held * D("0.27")),
                measured_gpu_hours=hours(held * D("0.9")),
            )
        )
    return lines


def _models(held: Decimal, held_cost: Decimal) -> list[ModelLine]:
    # Most of what was held is H100; each model has capacity nobody held.
    h100 = hours(held * D("0.8"))
    h100_cost = cents(held_cost * D("0.8"))
    return [
        ModelLine("H100-80GB-HBM3", h100 + D("1200.0000"), h100_cost + D("5520.00"), h100, h100_cost),
        ModelLine("L40S", held - h100 + D("300.5000"), held_cost - h100_cost + D("360.60"), held - h100,
                  held_cost - h100_cost),
    ]  # fmt: skip


def _report(mode: str = Mode.FULL, *, spreading: bool = True, lines: list[Line] | None = None) -> Report:
    lines = _lines() if lines is None else lines
    models = _models(sum((li.gpu_hours for li in lines), D(0)), sum((li.cost for li in lines), D(0)))
    spreading = spreading and mode == Mode.FULL
    if spreading:  # the H100's unallocated cost over the lines, by GPU-hours held; the L40S's stays platform
        shares = spread(models[0].unallocated_cost, {li.key: li.gpu_hours for li in lines})
        lines = [replace(li, platform_cost=shares.get(li.key, D(0))) for li in lines]
        models[0] = replace(models[0], spread_cost=sum(shares.values(), D(0)))
    return Report(
        start=MARCH[0],
        end=MARCH[1],
        group="team",
        mode=mode,
        spread=spreading,
        currency="EUR",
        lines=sorted(lines, key=lambda li: (-li.total, li.label)),
        models=models,
        adjustments=[Line(key="team-2", label="Team 2 (February correction)", cost=D("-42.10"))],
        notes=["No price is set for L4: its use is shown at no cost.", "A note with <markup> & ampersands."],
    )


@pytest.fixture
def full() -> Report:
    return _report()


@pytest.fixture
def showback() -> Report:
    return _report(Mode.SHOWBACK)


@pytest.fixture
def empty() -> Report:
    return Report(MARCH[0], MARCH[1], "team", Mode.SHOWBACK, False, "EUR", lines=[], models=[])


# -- CSV ----------------------------------------------------------------------------------------------


def _csv(report: Report) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(exports.to_csv(report).decode("utf-8"), newline="")))


def test_the_csv_reads_back_to_the_reports_totals(full: Report) -> None:
    assert full.unallocated_cost > 0 and full.adjustments and any(li.platform_cost for li in full.lines)
    rows = _csv(full)
    assert [row["section"] for row in rows] == ["line"] * 15 + ["adjustment", "platform", "total"]
    *body, total = rows
    lines = [row for row in body if row["section"] == "line"]
    assert D(total["total"]) == full.total == sum((D(row["total"]) for row in body), D(0))
    assert D(total["held_cost"]) == full.held_cost == sum((D(row["held_cost"]) for row in lines), D(0))
    assert D(total["gpu_hours"]) == full.gpu_hours
    assert sum((D(row["total"]) for row in lines), D(0)) == sum((li.total for li in full.lines), D(0))
    assert D(body[-1]["total"]) == full.unallocated_cost  # the platform row


def test_the_csv_writes_exact_decimals_and_the_reports_context(full: Report) -> None:
    rows = _csv(full)
    first, line = rows[0], full.lines[0]
    assert list(first) == [name for name, _, _ in exports.COLUMNS] + list(exports.CONTEXT_COLUMNS)
    assert (first["key"], first["held_cost"], first["gpu_hours"]) == (line.key, str(line.cost), str(line.gpu_hours))
    assert first["used_share"] == str((line.used_gpu_hours / line.gpu_hours).quantize(D("0.0001")))
    assert all(len(row["total"].split(".")[1]) == 2 for row in rows)
    assert all(len(row["gpu_hours"].split(".")[1]) == 4 for row in rows if row["gpu_hours"])
    assert {(r["period_start"], r["period_end"], r["group"], r["mode"], r["spread"], r["currency"]) for r in rows} == {
        ("2026-03-01T00:00:00+00:00", "2026-04-01T00:00:00+00:00", "team", "full", "true", "EUR")
    }


def test_the_csv_quotes_labels_and_defuses_formulas(full: Report) -> None:
    labels = {row["key"]: row["label"] for row in _csv(full)}
    assert labels["team-3"] == ODD
    assert labels["team-7"] == "'" + EVIL
    adjustment = next(row for row in _csv(full) if row["section"] == "adjustment")
    assert adjustment["total"] == "-42.10"  # a negative number is a number, not a formula


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"])
def test_texts_that_spreadsheets_run_get_an_apostrophe(text: str) -> None:
    assert exports.safe_text(text) == "'" + text
    assert exports.safe_text("a=1") == "a=1"


def test_showback_has_no_platform_row(showback: Report) -> None:
    rows = _csv(showback)
    assert "platform" not in {row["section"] for row in rows}
    assert all(row["platform_cost"] == "0.00" for row in rows)
    assert D(rows[-1]["total"]) == showback.total == showback.held_cost + showback.adjustments_cost


def test_full_recovery_shows_its_platform_row_even_at_zero() -> None:
    report = _report(lines=[])  # nothing held, nothing spread: all capacity is platform cost
    assert [row["section"] for row in _csv(report)] == ["adjustment", "platform", "total"]
    nothing = Report(MARCH[0], MARCH[1], "team", Mode.FULL, False, "EUR", lines=[], models=[])
    assert [(row["section"], row["total"]) for row in _csv(nothing)] == [("platform", "0.00"), ("total", "0.00")]


def test_an_empty_report_is_a_header_and_a_zero_total(empty: Report) -> None:
    [total] = _csv(empty)
    assert (total["section"], total["total"], total["held_cost"], total["used_share"]) == ("total", "0.00", "0.00", "")


# -- Excel --------------------------------------------------------------------------------------------


def _sheet_rows(data: bytes, title: str) -> list[dict[str, object]]:
    sheet = openpyxl.load_workbook(io.BytesIO(data))[title]
    header, *rows = sheet.iter_rows(values_only=True)
    return [dict(zip(header, row, strict=True)) for row in rows]


def _money(value: object) -> Decimal:
    assert isinstance(value, int | float)
    return cents(D(str(value)))


def test_the_workbook_reads_back_to_the_reports_totals(full: Report) -> None:
    data = exports.to_xlsx(full)
    assert openpyxl.load_workbook(io.BytesIO(data)).sheetnames == ["Chargeback", "GPU models", "Notes"]
    rows = _sheet_rows(data, "Chargeback")
    total = rows[-1]
    assert (total["Section"], _money(total["Total"])) == ("total", full.total)
    assert _money(total["Held cost"]) == full.held_cost
    lines = [row for row in rows if row["Section"] == "line"]
    assert sum((_money(row["Total"]) for row in lines), D(0)) == sum((li.total for li in full.lines), D(0))
    assert {row["Label"] for row in lines} >= {ODD, "'" + EVIL}  # text, not a formula


def test_the_workbook_formats_numbers_as_numbers(full: Report) -> None:
    sheet = openpyxl.load_workbook(io.BytesIO(exports.to_xlsx(full)))["Chargeback"]
    held, hours_, share = sheet["K2"], sheet["E2"], sheet["I2"]
    assert (held.data_type, hours_.data_type, share.data_type) == ("n", "n", "n")
    assert '"EUR"' in held.number_format and hours_.number_format == "#,##0.0000" and share.number_format == "0.0%"
    [evil] = [row[2] for row in sheet.iter_rows(min_row=2) if row[1].value == "team-7"]
    assert (evil.data_type, evil.value) == ("s", "'" + EVIL)


def test_the_workbook_has_the_models_and_the_notes(full: Report) -> None:
    data = exports.to_xlsx(full)
    *models, total = _sheet_rows(data, "GPU models")
    h100 = full.models[0]
    assert models[0]["GPU model"] == h100.gpu_model
    assert _money(models[0]["Unallocated cost"]) == h100.unallocated_cost
    assert _money(models[0]["Spread cost"]) == h100.spread_cost
    assert D(str(models[0]["Unallocated GPU-hours"])) == h100.unallocated_gpu_hours
    assert _money(total["Capacity cost"]) == sum((m.capacity_cost for m in full.models), D(0))
    notes = {(row["Item"], row["Value"]) for row in _sheet_rows(data, "Notes")}
    assert {("Mode", "full"), ("Currency", "EUR"), ("Note", full.notes[1])} <= notes


def test_the_workbook_is_the_same_bytes_every_time(full: Report) -> None:
    data = exports.to_xlsx(full)
    assert exports.to_xlsx(full) == data
    assert {info.date_time for info in zipfile.ZipFile(io.BytesIO(data)).infolist()} == {(1980, 1, 1, 0, 0, 0)}
    properties = openpyxl.load_workbook(io.BytesIO(data)).properties
    assert properties.created == properties.modified == datetime(2026, 4, 1)  # noqa: DTZ001 (naive UTC)


def test_an_empty_workbook_has_its_total_row(empty: Report) -> None:
    [total] = _sheet_rows(exports.to_xlsx(empty), "Chargeback")
    assert (total["Section"], total["Total"]) == ("total", 0)


# -- PDF ----------------------------------------------------------------------------------------------


@pytest.fixture
def poppler() -> None:
    """pdftotext and pdftoppm read the PDF as a person's viewer would; .ci/run installs them."""
    if not shutil.which("pdftotext") or not shutil.which("pdftoppm"):
        pytest.fail("pdftotext/pdftoppm are missing: install Debian's poppler-utils (.ci/run does).")


def _text(pdf: bytes, tmp_path: Path) -> str:
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", str(path), "-"], check=True, capture_output=True, text=True).stdout


@pytest.mark.usefixtures("poppler")
def test_the_pdf_holds_the_title_the_total_and_the_lines(full: Report, tmp_path: Path) -> None:
    pdf = exports.to_pdf(full, title="Chargeback <March> & co")
    assert pdf.startswith(b"%PDF")
    text = _text(pdf, tmp_path)
    assert "Chargeback <March> & co" in text  # escaped for the markup, shown as written
    assert f"{full.total:,}" in text and f"{full.held_cost:,}" in text
    assert ODD in text and "Team 0" in text and "Other" in text  # the chart's top 10 and the rest
    assert "H100-80GB-HBM3" in text and full.notes[1] in text


@pytest.mark.usefixtures("poppler")
def test_the_pdf_first_page_is_drawn(full: Report, tmp_path: Path) -> None:
    (tmp_path / "report.pdf").write_bytes(exports.to_pdf(full, title="March"))
    pages = ["pdftoppm", "-png", "-r", "50", "-f", "1", "-l", "1", str(tmp_path / "report.pdf"), str(tmp_path / "p")]
    subprocess.run(pages, check=True)
    [png] = tmp_path.glob("p*.png")
    with Image.open(png) as image:
        grey = image.convert("L")
        inked = sum(count for level, count in enumerate(grey.histogram()) if level < 200)
        red, _, blue = image.convert("RGB").split()
        coloured = sum(ImageChops.subtract(blue, red).histogram()[40:])  # the bars' blue
    assert inked > 0.02 * grey.width * grey.height
    assert coloured > 500


def test_the_tables_fold_the_smallest_lines_into_one(full: Report) -> None:
    many = replace(full, lines=_lines(30))
    rows = exports.rows(many, top=25)
    other = rows[25]
    assert (other.label, other.total) == ("Other (5 lines)", sum((li.total for li in many.lines[25:]), D(0)))
    assert rows[-1].total == many.total


def test_the_pdf_is_the_same_bytes_every_time(full: Report) -> None:
    assert exports.to_pdf(full, title="March") == exports.to_pdf(full, title="March")
    assert exports.to_pdf(full, title="March") != exports.to_pdf(full, title="April")


@pytest.mark.usefixtures("poppler")
def test_an_empty_pdf_says_so_instead_of_drawing_charts(empty: Report, tmp_path: Path) -> None:
    text = _text(exports.to_pdf(empty, title="Nothing"), tmp_path)
    assert "No GPU use was charged in this period." in text
    assert "No GPU capacity or use was recorded." in text
    assert "Total: 0.00 EUR" in text


# -- file names ---------------------------------------------------------------------------------------


def test_a_calendar_month_is_named_by_its_month(full: Report, showback: Report) -> None:
    assert exports.filename(showback, "csv") == "chargeback-2026-03-team-showback.csv"
    assert exports.filename(full, ".xlsx") == "chargeback-2026-03-team-full-spread.xlsx"


def test_other_periods_are_named_by_their_first_and_last_day(showback: Report) -> None:
    fortnight = replace(showback, end=datetime(2026, 3, 15, tzinfo=UTC))
    assert exports.filename(fortnight, "pdf") == "chargeback-2026-03-01_2026-03-14-team-showback.pdf"
    midday = replace(showback, end=datetime(2026, 3, 15, 12, tzinfo=UTC))
    assert exports.filename(midday, "pdf") == "chargeback-2026-03-01_2026-03-15-team-showback.pdf"


def test_the_month_is_the_billing_zones(showback: Report, settings: SettingsWrapper) -> None:
    settings.TIME_ZONE = "Europe/Berlin"
    berlin = ZoneInfo("Europe/Berlin")
    local = replace(showback, start=datetime(2026, 3, 1, tzinfo=berlin), end=datetime(2026, 4, 1, tzinfo=berlin))
    assert exports.filename(local, "csv") == "chargeback-2026-03-team-showback.csv"
    assert exports.filename(showback, "csv") == "chargeback-2026-03-01_2026-04-01-team-showback.csv"  # UTC's month
    assert _csv(local)[0]["period_start"] == "2026-03-01T00:00:00+01:00"
