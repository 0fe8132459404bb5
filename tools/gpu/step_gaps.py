#!/usr/bin/env python3
"""Where a training step's wall time goes beyond its kernels: reads step_trace.cpp's CSV.

    python3 tools/gpu/step_gaps.py trace.csv [--skip 2] [--top 25]

Steps are delimited by the optimizer's kernels (a run of kernels whose name holds "adamw" ends a
step). For each step after the first `skip`: its span (from the end of the previous step's
optimizer to the end of its own), the time the GPU was busy (the union of kernels, copies and
memsets), and the idle gaps, each named by the activities on either side. Gaps are summed over the
steps by (before, after) pair, largest first, and the host's waits on the GPU are listed with what
the GPU was doing when each ended. A trace with the host's runtime calls (LINEA_TRACE_API=1) also
lists, for the largest gaps, the calls the host made while the GPU sat idle.
"""
import argparse
import collections
import re
import shutil
import subprocess


def short_names(names):
    """Demangled kernel names without template arguments or parameters."""
    names = sorted(set(names))
    demangled = names
    if shutil.which("c++filt"):
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
        demangled = out.split("\n")[: len(names)]
    short = {}
    for raw, d in zip(names, demangled):
        s = d
        while True:  # drop <...> and (...) innermost first
            t = re.sub(r"<[^<>]*>", "", s)
            t = re.sub(r"\([^()]*\)", "", t)
            if t == s:
                break
            s = t
        short[raw] = s.replace("void ", "").strip()[:70]
    return short


def read(path):
    gpu, waits, calls = [], [], []
    with open(path) as f:
        for line in f:
            kind, start, end, stream, detail = line.rstrip("\n").split(",", 4)
            rec = (int(start), int(end), kind, detail, int(stream))
            {"host_wait": waits, "host_api": calls}.get(kind, gpu).append(rec)
    gpu.sort()
    waits.sort()
    calls.sort()
    names = short_names([r[3] for r in gpu if r[2] == "kernel"])
    label = lambda r: names[r[3]] if r[2] == "kernel" else f"{r[2]} {r[3]}"
    return gpu, waits, calls, label


def steps_of(gpu, label):
    """[(first index, last index)] of each step: up to and including a run of optimizer kernels."""
    ends, in_run = [], False
    for i, r in enumerate(gpu):
        is_opt = r[2] == "kernel" and "adamw" in label(r).lower()
        if in_run and not is_opt:
            ends.append(i - 1)
        in_run = is_opt
    if in_run:
        ends.append(len(gpu) - 1)
    return [(ends[k - 1] + 1, ends[k]) for k in range(1, len(ends))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    gpu, waits, calls, label = read(a.trace)
    steps = steps_of(gpu, label)[a.skip :]
    if not steps:
        raise SystemExit("no complete step found (no adamw kernels?)")
    gaps = collections.defaultdict(lambda: [0, 0.0])
    sizes = collections.Counter()
    size_bins = [(2, "<2 us"), (5, "2-5 us"), (20, "5-20 us"), (100, "20-100 us"), (1e18, ">100 us")]
    waited = collections.defaultdict(lambda: [0, 0.0])
    windows = collections.defaultdict(list)  # (before, after) -> the gaps' [start, end)
    totals = collections.Counter()
    for first, last in steps:
        span_start, span_end = gpu[first - 1][1], gpu[last][1]
        busy_end = span_start
        prev = gpu[first - 1]
        busy = 0.0
        for r in gpu[first : last + 1]:
            if r[0] > busy_end:
                gap = (r[0] - busy_end) / 1e3
                key = (label(prev), label(r))
                gaps[key][0] += 1
                gaps[key][1] += gap
                windows[key].append((busy_end, r[0]))
                sizes[next(n for lim, n in size_bins if gap < lim)] += gap
            busy += max(0, r[1] - max(r[0], busy_end)) / 1e3
            if r[1] > busy_end:
                busy_end, prev = r[1], r
        kernels = [r for r in gpu[first : last + 1] if r[2] == "kernel"]
        copies = [r for r in gpu[first : last + 1] if r[2] != "kernel"]
        totals["span"] += (span_end - span_start) / 1e3
        totals["busy"] += busy
        totals["kernels"] += len(kernels)
        totals["kernel_us"] += sum(r[1] - r[0] for r in kernels) / 1e3
        totals["copies"] += len(copies)
        totals["copy_us"] += sum(r[1] - r[0] for r in copies) / 1e3
        for w in waits:
            if span_start <= w[1] <= span_end:
                before = [r for r in gpu[first - 1 : last + 1] if r[1] <= w[1]]
                what = label(before[-1]) if before else "?"
                waited[(w[3], what)][0] += 1
                waited[(w[3], what)][1] += (w[1] - w[0]) / 1e3
    n = len(steps)
    print(f"{n} steps: span {totals['span'] / n / 1e3:.3f} ms, GPU busy {totals['busy'] / n / 1e3:.3f} ms, "
          f"idle {(totals['span'] - totals['busy']) / n / 1e3:.3f} ms; per step {totals['kernels'] / n:.0f} kernels "
          f"({totals['kernel_us'] / n / 1e3:.3f} ms), {totals['copies'] / n:.0f} copies/memsets ({totals['copy_us'] / n / 1e3:.3f} ms)")
    print("idle by gap size, ms per step: " + ", ".join(f"{name} {sizes[name] / n / 1e3:.3f}" for _, name in size_bins))
    print(f"\nlargest idle time by neighbours (us per step, gaps per step): before -> after")
    for (before, after), (count, us) in sorted(gaps.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"{us / n:9.1f} {count / n:5.1f}  {before}  ->  {after}")
    if calls:
        print(f"\nthe host's runtime calls inside the {min(a.top, 5)} largest gaps (us per step, calls per step)")
        for key, _ in sorted(gaps.items(), key=lambda kv: -kv[1][1])[: min(a.top, 5)]:
            inside = collections.defaultdict(lambda: [0, 0.0])
            for lo, hi in windows[key]:
                for c in calls:
                    if lo <= c[0] < hi:
                        inside[c[3]][0] += 1
                        inside[c[3]][1] += (min(c[1], hi) - c[0]) / 1e3
            print(f"  {key[0]}  ->  {key[1]}")
            for name, (count, us) in sorted(inside.items(), key=lambda kv: -kv[1][1])[:8]:
                print(f"    {us / n:9.1f} {count / n:5.1f}  {name}")
    print(f"\nhost waits ending inside a step (us per step, count per step): kind, the GPU's last activity before")
    for (kind, what), (count, us) in sorted(waited.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"{us / n:9.1f} {count / n:5.1f}  {kind}  after {what}")


if __name__ == "__main__":
    main()
