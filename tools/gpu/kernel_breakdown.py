"""Sums the kernel times of an ncu CSV log (`ncu --metrics gpu__time_duration.sum --csv`) by
kernel name and prints the largest, with their share of the total: where a run's GPU time goes.
Usage: python3 kernel_breakdown.py ncu.csv [steps]  (steps: divide totals by the steps profiled)"""
import csv, re, sys
from collections import defaultdict


def short(name):
    # "void linea::cuda::(anonymous)::chunk_output_kernel<float, true>(...)" -> "chunk_output_kernel<float, true>"
    name = re.sub(r"\(.*$", "", name.replace("(anonymous namespace)::", "").replace("(anonymous)::", ""))
    name = re.sub(r"^void ", "", name)
    return name.split("::")[-1][:90] if "<" not in name.split("::")[-1] else name.split("::")[-1][:90]


def main():
    path, steps = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    lines = [l for l in open(path) if l.startswith('"')]
    total, count = defaultdict(float), defaultdict(int)
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0}.get(row["Metric Unit"], 1e-6)
        v = float(row["Metric Value"].replace(",", "")) * scale
        total[short(row["Kernel Name"])] += v
        count[short(row["Kernel Name"])] += 1
    all_ms = sum(total.values())
    print(f"{all_ms / steps:.3f} ms of kernels per step, {sum(count.values()) / steps:.0f} launches per step")
    for name, ms in sorted(total.items(), key=lambda kv: -kv[1])[:40]:
        print(f"{ms / steps:9.3f} ms {100 * ms / all_ms:5.1f}% {count[name] / steps:6.0f}x  {name}")


if __name__ == "__main__":
    main()
