"""Cells that a spreadsheet would run: every CSV dealtrail writes goes through here.

A CSV cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by
Excel, LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)``, ``+cmd|...``: OWASP's
"CSV injection"). Event fields (dealer IDs, table IDs, messages) come from devices and people, so
such a text cell is written with a leading ``'``, which spreadsheets show as text and never run.
Parquet and JSON are not opened by spreadsheets and stay raw.
"""

from __future__ import annotations

import pyarrow as pa

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula."""


def neutralise_cell(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet runs: a leading ``'`` before a formula character.

    Args:
        text: the cell's text as it would be written.

    Returns:
        ``text`` itself, or ``'`` + ``text`` when it begins with one of :data:`FORMULA_STARTS`.
    """
    return "'" + text if text[:1] in FORMULA_STARTS else text


def neutralise_table(table: pa.Table) -> pa.Table:
    """``table`` with every text cell passed through :func:`neutralise_cell` (for a CSV writer such
    as DuckDB's ``COPY ... (FORMAT csv)``).

    Only text columns change: numbers and times are written as values, and a list is written
    from ``[``, which no spreadsheet runs.

    Args:
        table: the rows to write (Arrow).

    Returns:
        A new table with the same schema.
    """
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            values = [None if v is None else neutralise_cell(v) for v in column.to_pylist()]
            columns.append(pa.chunked_array([pa.array(values, type=field.type)], type=field.type))
        else:
            columns.append(column)
    return pa.Table.from_arrays(columns, schema=table.schema)
