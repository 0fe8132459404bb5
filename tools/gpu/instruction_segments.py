"""Where a kernel's instructions go, from an ncu source page of SASS exported as CSV
(ncu --import R --page source --csv --print-source sass > F):
    instruction_segments.py F [N] [UNITS]
Consecutive instructions executed the same number of times form a segment (a straight run of
code: a loop body, one side of a branch); segments are listed by the instructions they executed,
largest first (N of them, 15 by default), with their stall samples and their first instructions.
UNITS divides the counts (say blocks x chunks, for warp instructions per block and chunk), which
is how the state-pass experiment in docs/benchmarks.md was read."""
import sys

from ncu_source_page import number, read

header, body, samples = read(sys.argv[1])
top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
units = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
source, address = header.index("Source"), header.index("Address")
executed = header.index("Instructions Executed")

segments = []  # [first address, instructions, executions of each, executed in all, stall samples]
for r in body:
    if len(r) <= executed:
        continue
    count = number(r[executed])
    if segments and abs(segments[-1][2] - count) < 1:
        segments[-1][1].append(r[source].strip())
        segments[-1][3] += count
        segments[-1][4] += number(r[samples])
    else:
        segments.append([r[address], [r[source].strip()], count, count, number(r[samples])])
total = sum(s[3] for s in segments) or 1.0
print(f"{total / units:.0f} instructions executed per unit ({units:g} units); segments, largest first:")
for first, code, each, summed, stalls in sorted(segments, key=lambda s: -s[3])[:top]:
    print(f"{100 * summed / total:5.1f}%  {summed / units:9.0f} per unit  {len(code):4d} instructions x {each / units:7.2f}"
          f"  stall samples {stalls:7.0f}  at {first}")
    print("       " + " | ".join(c[:36] for c in code[:6]))
