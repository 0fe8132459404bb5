#!/usr/bin/env python3
"""What one host-synchronized run does against another: reads step_trace.cpp's CSV.

    python3 tools/gpu/segment_diff.py trace.csv            # list the segments
    python3 tools/gpu/segment_diff.py trace.csv A B        # and segment A's work against B's

A benchmark that waits for the device after each run (`linea bench decode` times prefill and the
training forward so) leaves one segment per run between the host's waits. For each segment: its
GPU operations, the GPU's window (first start to last end) against its busy time, and, with
LINEA_TRACE_API=1, the host's runtime calls. With A and B: the kernels whose count or time differ
between the two segments, and A's largest idle gaps with the host calls made during them (a
launch that takes the host longer than the kernel before it takes the GPU shows up there).
"""
import argparse
import collections

from step_gaps import read


def segments(gpu, waits, calls):
    """[(gpu records, host calls, the wait that ends it)] between consecutive host waits."""
    out, start = [], 0
    for w in waits:
        in_window = lambda r: start <= r[0] < w[1]
        out.append(([r for r in gpu if in_window(r)], [c for c in calls if in_window(c)], w))
        start = w[1]
    return out


def work(records, label):
    """Count and microseconds per kernel name (copies and memsets by kind and size)."""
    count, us = collections.Counter(), collections.Counter()
    for r in records:
        count[label(r)] += 1
        us[label(r)] += (r[1] - r[0]) / 1e3
    return count, us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("a", type=int, nargs="?")
    ap.add_argument("b", type=int, nargs="?")
    ap.add_argument("--gaps", type=int, default=6, help="how many of A's largest gaps to list")
    args = ap.parse_args()
    gpu, waits, calls, label = read(args.trace)
    segs = segments(gpu, waits, calls)
    for i, (records, host, wait) in enumerate(segs):
        if not records:
            continue
        busy = sum(r[1] - r[0] for r in records) / 1e3
        window = (records[-1][1] - records[0][0]) / 1e3
        launches = collections.Counter(c[3].split("_v")[0] for c in host)
        top = ", ".join(f"{n} x{k}" for n, k in launches.most_common(4))
        print(f"segment {i}: {len(records)} GPU operations, window {window:.1f} us, busy {busy:.1f} us, "
              f"{len(host)} host calls{': ' + top if top else ''}")
    if args.a is None or args.b is None:
        return
    (ca, ta), (cb, tb) = work(segs[args.a][0], label), work(segs[args.b][0], label)
    print(f"\nsegment {args.a} against {args.b}: count, count, us, us, kernel")
    for name in sorted(set(ca) | set(cb), key=lambda n: -(ta[n] + tb[n])):
        if ca[name] != cb[name] or abs(ta[name] - tb[name]) > 3:
            print(f"  {ca[name]:4d} {cb[name]:4d} {ta[name]:9.1f} {tb[name]:9.1f}  {name}")
    records, host, _ = segs[args.a]
    gaps = sorted(((b[0] - a[1], a, b) for a, b in zip(records, records[1:])), key=lambda g: -g[0])
    print(f"\nsegment {args.a}'s largest idle gaps")
    for gap, before, after in gaps[: args.gaps]:
        during = collections.Counter(c[3].split("_v")[0] for c in host if before[1] <= c[0] < after[0])
        print(f"  {gap / 1e3:7.1f} us  {label(before)} -> {label(after)}  host: {dict(during.most_common(5))}")


if __name__ == "__main__":
    main()
