# Where flash-linear-attention's chunk_gla spends its forward + backward, kernel by kernel (B=8, H=8,
# d=64, float32 with TF32, the GLA gate): its wall time with CUDA events, then torch.profiler's CUDA
# time of each kernel averaged over 5 more calls, to set beside `linea bench scan --what kernel`
# under ncu (docs/benchmarks.md, twenty-eighth session). Run from the repository root with fla's
# source on the path, as anchor.py:  python3 tools/gpu/fla_profile.py 16384,4096
import os, sys, torch
import torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".gpu"))
import torch_bench as tb
from torch.profiler import profile, ProfilerActivity
torch.backends.cuda.matmul.allow_tf32 = True
B, H, D = 8, 8, 64
for T in [int(t) for t in sys.argv[1].split(",")]:
    q, k = (torch.rand(B, T, H, D, device="cuda", requires_grad=True) for _ in range(2))
    v = torch.randn(B, T, H, D, device="cuda", requires_grad=True)
    g = F.logsigmoid(torch.randn(B, T, H, D, device="cuda") + 3).requires_grad_(True)
    do = torch.randn(B, T, H, D, device="cuda")
    def f():
        o, _ = tb.chunk_gla(q, k, v, g, scale=0.1)
        o.backward(do)
    for _ in range(3): f()
    torch.cuda.synchronize()
    print(f"T={T} fwd+bwd {tb.cuda_time(f):.3f} ms", flush=True)
    reps = 5
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps): f()
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / reps / 1000.0, e.count // reps) for e in prof.key_averages()
            if e.device_time_total > 0]
    rows.sort(key=lambda r: -r[1])
    total = sum(r[1] for r in rows)
    print(f"T={T} kernels summed {total:.3f} ms per fwd+bwd")
    for name, ms, n in rows[:25]:
        print(f"  {ms:8.3f} ms  x{n:<3d} {name[:110]}")
