"""Where a kernel's issue slots go, from an ncu report's raw page exported as CSV
(ncu --import R --page raw --csv > F):  ncu_pipes_stalls.py F

For each profiled launch: its time, the share of issue slots used, each pipe's share of its peak
(the ALU pipe: integer, compare and logic; FMA: float and IMAD; LSU: shared and global loads and
stores; tensor: mma; XU: conversions and MUFU), L1 and DRAM throughput, and the warp stall reasons
per issued instruction, largest first. It needs the sections SpeedOfLight, WarpStateStats,
ComputeWorkloadAnalysis, MemoryWorkloadAnalysis and SchedulerStats (tools/gpu/profile_scan.sh
collects them)."""
import csv
import sys

PIPES = [("issue slots busy", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
         ("ALU pipe", "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"),
         ("FMA pipe", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
         ("LSU pipe", "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"),
         ("tensor pipe", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
         ("XU pipe", "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
         ("FP64 pipe", "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"),
         ("L1 / shared throughput", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
         ("DRAM throughput", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")]
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


def value(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def main(path):
    rows = list(csv.reader(open(path)))
    if len(rows) < 3:
        sys.exit(f"{path}: no profiled launch (an ncu raw page has a header, units, then a row a launch)")
    header, launches = rows[0], rows[2:]
    column = {name: i for i, name in enumerate(header)}
    for launch in launches:
        name = launch[column["Kernel Name"]] if "Kernel Name" in column else "?"
        time = launch[column["gpu__time_duration.sum"]] if "gpu__time_duration.sum" in column else "?"
        print(f"== {name[:100]}  ({time} {rows[1][column.get('gpu__time_duration.sum', 0)]})")
        for label, metric in PIPES:
            if metric in column and value(launch[column[metric]]) is not None:
                print(f"  {label:<24} {value(launch[column[metric]]):6.1f}%")
        stalls = [(h[len(STALL_PREFIX):-len(STALL_SUFFIX)], value(launch[i])) for h, i in column.items()
                  if h.startswith(STALL_PREFIX) and h.endswith(STALL_SUFFIX) and value(launch[i])]
        stalls = [s for s in sorted(stalls, key=lambda s: -s[1]) if s[1] >= 0.05]
        print("  stalls per issued instruction: " + ", ".join(f"{n} {v:.2f}" for n, v in stalls))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ncu_pipes_stalls.py RAW_PAGE.csv")
    main(sys.argv[1])
