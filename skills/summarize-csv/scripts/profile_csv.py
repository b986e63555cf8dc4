"""Profile a CSV file with the standard library only: shape, and per column its type, blanks,
distinct values, range or lengths, most common values and examples.

Run it as `python3 profile_csv.py FILE.csv [MAX_ROWS]`, or as run_python code after setting
CSV_PATH on the line below (relative to the workspace).
"""

import csv
import re
import statistics
import sys
from collections import Counter
from datetime import datetime

CSV_PATH = "data.csv"  # the file to profile, relative to the workspace
MAX_ROWS = 200_000  # rows read at most; the report says when it stopped early
DATE_FORMATS = ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%d/%m/%Y", "%m/%d/%Y")


def sniff(path):
    """The file's encoding and CSV dialect, guessed from its first 64 KB."""
    with open(path, "rb") as handle:
        raw = handle.read(65536)
    encoding = "utf-8-sig"
    try:
        raw.decode(encoding)
    except UnicodeDecodeError:
        encoding = "latin-1"
    sample = raw.decode(encoding, errors="replace")
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    return encoding, dialect


THOUSANDS = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d+)?$")


def as_number(value):
    """The value as a float ("1,234.5" too), or None."""
    value = value.strip()
    if THOUSANDS.match(value):
        value = value.replace(",", "")
    try:
        return float(value)
    except ValueError:
        return None


def as_date(value):
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(value.strip(), fmt)
        except ValueError:
            continue
    return None


def column_type(values):
    """integer, number, date, boolean or text: the narrowest type every value fits."""
    if all(as_number(v) is not None for v in values):
        numbers = [as_number(v) for v in values]
        return "integer" if all(n.is_integer() for n in numbers) else "number"
    if all(v.strip().lower() in ("true", "false", "yes", "no", "0", "1") for v in values):
        return "boolean"
    if all(as_date(v) for v in values):
        return "date"
    return "text"


def describe(name, values, rows):
    filled = [v for v in values if v.strip()]
    blank, counts = rows - len(filled), Counter(filled)
    kind = column_type(filled) if filled else "empty"
    odd = [v for v in filled if as_number(v) is None]
    mostly = kind == "text" and len(odd) <= len(filled) * 0.05
    if mostly:  # a numeric column with a few stray values ("N/A", "-"): profile the numbers
        filled = [v for v in filled if as_number(v) is not None]
        kind = f"{column_type(filled)} (mostly)"
    lines = [f"## {name}", f"- type: {kind}; blank: {blank} of {rows}; distinct: {len(counts)}"]
    if mostly:
        lines.append(
            f"- {len(odd)} values are not numbers: "
            + ", ".join(repr(v[:40]) for v in list(dict.fromkeys(odd))[:5])
        )
    if kind.startswith(("integer", "number")):
        numbers = [as_number(v) for v in filled]
        lines.append(
            f"- min {min(numbers):g}, max {max(numbers):g}, mean "
            f"{statistics.fmean(numbers):.4g}, median {statistics.median(numbers):g}"
        )
    elif kind == "date":
        dates = sorted(as_date(v) for v in filled)
        lines.append(f"- from {dates[0]:%Y-%m-%d} to {dates[-1]:%Y-%m-%d}")
    elif kind == "text":
        lengths = [len(v) for v in filled]
        lines.append(f"- length {min(lengths)}-{max(lengths)} characters")
    if counts and len(counts) < sum(counts.values()):
        common = ", ".join(f"{v[:40]!r} ({n})" for v, n in counts.most_common(5))
        lines.append(f"- most common: {common}")
    if filled:
        examples = ", ".join(repr(v[:40]) for v in list(dict.fromkeys(filled))[:3])
        lines.append(f"- examples: {examples}")
    return lines


def profile(path, max_rows=MAX_ROWS):
    encoding, dialect = sniff(path)
    with open(path, newline="", encoding=encoding, errors="replace") as handle:
        reader = csv.reader(handle, dialect)
        header = next(reader, None)
        if header is None:
            print(f"{path} is empty.")
            return
        rows: list[list[str]] = []
        ragged, stopped = 0, False
        for row in reader:
            if len(rows) >= max_rows:
                stopped = True
                break
            ragged += len(row) != len(header)
            rows.append(row + [""] * (len(header) - len(row)))
    delimiter = {"\t": "tab"}.get(dialect.delimiter, repr(dialect.delimiter))
    print(
        f"# {path}\n{len(rows)} rows{' (stopped early: more rows follow)' if stopped else ''}"
        f" x {len(header)} columns; delimiter {delimiter}; encoding {encoding}"
    )
    if ragged:
        print(f"warning: {ragged} rows have a different number of fields than the header")
    duplicates = len(rows) - len({tuple(r) for r in rows})
    if duplicates:
        print(f"duplicate rows: {duplicates}")
    for index, name in enumerate(header):
        print(
            "\n".join(
                describe(name or f"(column {index + 1})", [r[index] for r in rows], len(rows))
            )
        )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        profile(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else MAX_ROWS)
    else:
        profile(CSV_PATH)
