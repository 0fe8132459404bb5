# The PyTorch anchors this session needs, from ../shared/bench/torch_bench.py's own functions:
# SDPA causal fwd+bwd in fp32 at T = 1k, 4k, 16k (B=8, H=8, d=64, as `linea bench attention`);
# the standard training step for softmax (eager and torch.compile) and ReGLA (fla, eager).
import sys, torch
import torch.nn.functional as F
sys.path.insert(0, ".gpu")
import torch_bench as tb
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
tb.emit(kind="env", torch=torch.__version__, device=torch.cuda.get_device_name(), fla=tb.HAVE_FLA)
cfg = dict(V=8192, d=512, L=6, H=8, B=16, T=1024)


def sdpa(T, B=8, H=8, D=64):
    q, k, v = (torch.randn(B, H, T, D, device="cuda", requires_grad=True) for _ in range(3))
    do = torch.randn(B, H, T, D, device="cuda")

    def f():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(do)
    tb.emit(kind="kernel", T=T, B=B, H=H, D=D, prec="fp32", sdpa_causal_ms=round(tb.cuda_time(f), 3))


for what in sys.argv[1].split(","):
    if what == "sdpa":
        for T in (1024, 4096, 16384):
            sdpa(T)
    elif what == "softmax_eager":
        tb.bench_train("softmax", "-", "fp32", False, cfg)
    elif what == "softmax_compile":
        tb.bench_train("softmax", "-", "fp32", True, cfg)
    elif what == "regla_eager":
        tb.bench_train("regla", "fla", "fp32", False, cfg)
