"""The source lines with the most warp-stall samples in an ncu source page exported as CSV
(ncu --import R --page source --csv --print-source sass|cuda > F):  top_source_lines.py F [N]."""
import csv
import sys

rows = list(csv.reader(open(sys.argv[1], errors="replace")))
top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
header_at = next(i for i, r in enumerate(rows) if any("Sampling" in c for c in r))
header = rows[header_at]
samples = next(i for i, c in enumerate(header) if "Sampling" in c and "All" in c)
line_col = next((i for i, c in enumerate(header) if c.strip() in ("#", "Line", "Address")), 0)
source_col = next((i for i, c in enumerate(header) if c.strip() == "Source"), 1)


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


body = [r for r in rows[header_at + 1:] if len(r) > samples]
total = sum(number(r[samples]) for r in body) or 1.0
print(f"{total:.0f} stall samples; columns: {', '.join(header[:12])}")
for r in sorted(body, key=lambda r: -number(r[samples]))[:top]:
    print(f"{100 * number(r[samples]) / total:5.1f}%  line {r[line_col]:>5}  {r[source_col].strip()[:150]}")
