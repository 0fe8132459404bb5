#!/usr/bin/env python3
"""Where a replayed decoding step's time goes, node by node: reads step_trace.cpp's CSV of a
`linea bench decode` run.

    CUDA_INJECTION64_PATH=/tmp/step_trace.so LINEA_TRACE_OUT=t.csv \
      build-gpu/tools/linea bench decode --device cuda --letters R --contexts 2048 --batches 1
    python3 tools/gpu/decode_timeline.py t.csv 33 [--steps 50]

(33: the step's graph nodes, bench decode's decode_b1_graph_nodes.) ncu times each kernel alone
(profile_decode.sh); in a replay the kernels are launched overlapped (cuda/launch.cuh) and start
before the one ahead of them ends, so a kernel's duration says little about the step. What a
node costs the step is what it adds to it: its end minus the latest end before it. The last
`steps` whole steps of the trace are taken (the bench replays the batch-1 graph last); for each
node, in launch order, the medians of its duration and of what it adds.
"""
import argparse
import statistics

from step_gaps import short_names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("nodes", type=int, help="kernels per replayed step")
    parser.add_argument("--steps", type=int, default=50, help="steps taken from the trace's end")
    args = parser.parse_args()
    kernels = []
    with open(args.trace) as f:
        for line in f:
            kind, start, end, _, detail = line.rstrip("\n").split(",", 4)
            if kind == "kernel":
                kernels.append((int(start), int(end), detail))
    kernels.sort()
    n = args.nodes
    names = [k[2] for k in kernels]
    # The replays: the last stretch of the trace where every kernel's name equals the name n
    # kernels on (the bench may run a few kernels after them), at most `steps` periods of it. A
    # step begins at the node after the largest gap, the graph's launch.
    same = [names[i] == names[i + n] for i in range(len(names) - n)]
    end = len(same)
    while end > 0 and not same[end - 1]:
        end -= 1
    begin = end
    while begin > 0 and same[begin - 1]:
        begin -= 1
    periods = (end - begin) // n + 1  # whole periods of kernels [begin, end + n)
    if periods < 3:
        raise SystemExit(f"no stretch of repeating sequences of {n} kernels in the trace")
    take = min(args.steps, periods - 1)
    first = end + n - (take + 1) * n
    gaps = [statistics.median(kernels[first + s * n + i][0] - kernels[first + s * n + i - 1][1] for s in range(1, take))
            for i in range(n)]
    first += max(range(n), key=lambda i: gaps[i])
    short = short_names(names[first:first + n])
    durations = [[] for _ in range(n)]
    adds = [[] for _ in range(n)]
    spans = []
    latest = kernels[first - 1][1]
    for s in range(take):
        step_start = latest
        for i in range(n):
            start, end, _ = kernels[first + s * n + i]
            durations[i].append((end - start) / 1e3)
            adds[i].append((end - latest) / 1e3)
            latest = max(latest, end)
        spans.append((latest - step_start) / 1e3)
    print(f"{take} steps, median span {statistics.median(spans):.1f} us")
    print(" node  duration_us  adds_us  kernel")
    for i in range(n):
        name = short[names[first + i]]
        print(f"{i:5d} {statistics.median(durations[i]):12.2f} {statistics.median(adds[i]):8.2f}  {name}")
    print(f"sum of adds {sum(statistics.median(a) for a in adds):.1f} us")


if __name__ == "__main__":
    main()
