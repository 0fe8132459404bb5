#!/bin/bash
# Run from the repository root on the GPU machine after a build into build-gpu (full_run.sh):
# ncu's detailed view of the chunked scan kernels at the kernel benchmark's shape (B=8, H=8, d=64,
# LENGTH=1024 by default, GLA gate): occupancy, where warps stall, memory and pipe use, and the
# source lines with the most stall samples. One launch of each kernel (KERNELS, a regex) is
# profiled; the full report goes to $OUT/scan.ncu-rep, the text summary to stdout.
set -o pipefail
LENGTH=${LENGTH:-1024} KERNELS=${KERNELS:-chunk_gradient|chunk_output|chunk_updates|state_scan}
ncu --clock-control none --kernel-name "regex:$KERNELS" --launch-count ${COUNT:-6} \
  --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  --section SourceCounters --import-source no -o $OUT/scan -f \
  ./build-gpu/tools/linea bench scan --device cuda --what kernel --algorithms chunked --lengths $LENGTH \
  --repeats 1 > $OUT/profile_scan.log 2>&1
echo "ncu rc=$?"
ncu --import $OUT/scan.ncu-rep --print-summary none --page details 2>/dev/null |
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Shared Memory Config|Achieved Occupancy|Theoretical Occ|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|Stall|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|Executed Ipc A|Local Memory|Bank" | head -${LINES_MAX:-160}
# Each launch's pipes, throughputs and stall reasons in one table (the details page above has the
# pipes only as charts and no stall reasons).
ncu --import $OUT/scan.ncu-rep --page raw --csv > $OUT/scan_raw.csv 2>/dev/null &&
  python3 tools/gpu/ncu_pipes_stalls.py $OUT/scan_raw.csv
# With SOURCE=1 (build with -DCMAKE_CUDA_FLAGS=-lineinfo): the stall samples by source line of the
# first kernel that KERNELS matches.
# With UNITS as well (blocks x chunks of that launch), where its instructions go, per block and chunk.
if [ -n "$SOURCE" ]; then
  ncu --import $OUT/scan.ncu-rep --page source --csv --print-source sass > $OUT/scan_source.csv 2>&1
  python3 tools/gpu/top_source_lines.py $OUT/scan_source.csv ${TOP:-50}
  if [ -n "$UNITS" ]; then python3 tools/gpu/instruction_segments.py $OUT/scan_source.csv 15 $UNITS; fi
fi
