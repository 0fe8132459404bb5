"""An ncu source page exported as CSV (ncu --import R --page source --csv --print-source sass|cuda),
as top_source_lines.py and instruction_segments.py read it: the header row, the rows after it,
and the column of warp-stall samples (all samples)."""
import csv


def number(text):
    """A cell as a number: ncu writes thousands with commas, and blanks where it has none."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read(path):
    """(header, rows that reach the samples column, index of the samples column)."""
    rows = list(csv.reader(open(path, errors="replace")))
    header_at = next(i for i, r in enumerate(rows) if any("Sampling" in c for c in r))
    header = rows[header_at]
    samples = next(i for i, c in enumerate(header) if "Sampling" in c and "All" in c)
    return header, [r for r in rows[header_at + 1:] if len(r) > samples], samples
