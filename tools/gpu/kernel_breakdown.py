"""Sums the kernel times of an ncu CSV log (`ncu --metrics gpu__time_duration.sum --csv`) by
kernel name and prints the largest, with their share of the total: where a run's GPU time goes.
Usage: python3 kernel_breakdown.py ncu.csv [steps] [last]  (steps: divide totals by the steps
profiled; last: only the log's last `last` kernels, e.g. one replayed decoding step, also listed in
launch order)"""
import csv, re, sys
from collections import defaultdict


def short(name):
    # "void linea::cuda::(anonymous)::chunk_output_kernel<float, true>(...)" -> "chunk_output_kernel<float, true>"
    name = re.sub(r"\(.*$", "", name.replace("(anonymous namespace)::", "").replace("(anonymous)::", ""))
    name = re.sub(r"^void ", "", name)
    return name.split("::")[-1][:90] if "<" not in name.split("::")[-1] else name.split("::")[-1][:90]


def main():
    path, steps = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    last = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    lines = [l for l in open(path) if l.startswith('"')]
    timed = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0}.get(row["Metric Unit"], 1e-6)
        timed.append((short(row["Kernel Name"]), float(row["Metric Value"].replace(",", "")) * scale))
    if last:
        timed = timed[-last:]
        for name, ms in timed:
            print(f"{1000 * ms:8.1f} us  {name}")
    total, count = defaultdict(float), defaultdict(int)
    for name, ms in timed:
        total[name] += ms
        count[name] += 1
    all_ms = sum(total.values())
    print(f"{all_ms / steps:.3f} ms of kernels per step, {sum(count.values()) / steps:.0f} launches per step")
    for name, ms in sorted(total.items(), key=lambda kv: -kv[1])[:40]:
        print(f"{ms / steps:9.3f} ms {100 * ms / all_ms:5.1f}% {count[name] / steps:6.0f}x  {name}")


if __name__ == "__main__":
    main()
