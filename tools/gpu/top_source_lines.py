"""The source lines with the most warp-stall samples in an ncu source page exported as CSV
(ncu --import R --page source --csv --print-source sass|cuda > F):  top_source_lines.py F [N]."""
import sys

from ncu_source_page import number, read

header, body, samples = read(sys.argv[1])
top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
line_col = next((i for i, c in enumerate(header) if c.strip() in ("#", "Line", "Address")), 0)
source_col = next((i for i, c in enumerate(header) if c.strip() == "Source"), 1)

total = sum(number(r[samples]) for r in body) or 1.0
print(f"{total:.0f} stall samples; columns: {', '.join(header[:12])}")
for r in sorted(body, key=lambda r: -number(r[samples]))[:top]:
    print(f"{100 * number(r[samples]) / total:5.1f}%  line {r[line_col]:>5}  {r[source_col].strip()[:150]}")
