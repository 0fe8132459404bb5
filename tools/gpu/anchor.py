# The PyTorch anchors, from ../shared/bench/torch_bench.py's own functions, by the names given:
#   sdpa             SDPA causal fwd+bwd in fp32 at T = 1k, 4k, 16k (B=8, H=8, d=64, as
#                    `linea bench attention`); sdpa_bf16: the same in bf16 (its FlashAttention
#                    backend; `linea bench attention --dtype bfloat16`);
#   gla_kernel       flash-linear-attention's chunk_gla alone, fwd and fwd+bwd in fp32, at the same
#                    shapes (torch_bench.bench_kernel, as `linea bench scan --what kernel`), and its
#                    peak memory; gla_kernel_bf16: chunk_gla's times in bf16 (as `linea bench scan
#                    --what kernel --dtype bfloat16`);
#   softmax_eager, softmax_compile, regla_eager, regla_compile
#                    the standard training step (fla's chunk_gla for ReGLA); softmax_bf16_eager and
#                    the like: the same under torch.autocast(bfloat16);
#   decode           ../shared/bench/decode_graph_bench.py's batch-1 greedy decode with each step
#                    captured in a CUDA graph, softmax and ReGLA, 512, 2k and 8k tokens from
#                    position 0 (as `linea bench decode`'s decode_b1 at those contexts).
# fla's Triton kernels autotune on their first call of each shape (minutes); they keep the
# results in Triton's cache (TRITON_CACHE_DIR), which tools/gpu/full_run.sh carries between runs.
import os, sys, torch
import torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".gpu"))
import torch_bench as tb
import decode_graph_bench as dgb
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
tb.emit(kind="env", torch=torch.__version__, device=torch.cuda.get_device_name(), fla=tb.HAVE_FLA)
cfg = dict(V=8192, d=512, L=6, H=8, B=16, T=1024)


def sdpa(T, B=8, H=8, D=64, prec="fp32"):
    dt = torch.bfloat16 if prec == "bf16" else torch.float32
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dt, requires_grad=True) for _ in range(3))
    do = torch.randn(B, H, T, D, device="cuda", dtype=dt)

    def f():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(do)
    tb.emit(kind="kernel", T=T, B=B, H=H, D=D, prec=prec, sdpa_causal_ms=round(tb.cuda_time(f), 3))


def gla_kernel(T, B=8, H=8, D=64):
    tb.bench_kernel(T, "fp32")  # emits chunk_gla's fwd+bwd and fwd times (and SDPA's)
    # Peak memory of one fwd+bwd beyond the inputs, as `linea bench scan` measures its own.
    q, k = (torch.rand(B, T, H, D, device="cuda", requires_grad=True) for _ in range(2))
    v = torch.randn(B, T, H, D, device="cuda", requires_grad=True)
    g = F.logsigmoid(torch.randn(B, T, H, D, device="cuda") + 3).requires_grad_(True)
    do = torch.randn(B, T, H, D, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    o, _ = tb.chunk_gla(q, k, v, g, scale=0.1)
    o.backward(do)
    torch.cuda.synchronize()
    tb.emit(kind="kernel_memory", T=T, prec="fp32",
            fla_chunk_gla_peak_mib=round((torch.cuda.max_memory_allocated() - before) / 2**20, 1))


for what in sys.argv[1].split(","):
    if what in ("sdpa", "sdpa_bf16"):
        for T in (1024, 4096, 16384):
            sdpa(T, prec="bf16" if what == "sdpa_bf16" else "fp32")
    elif what == "gla_kernel":
        for T in (1024, 4096, 16384):
            gla_kernel(T)
    elif what == "gla_kernel_bf16":
        for T in (1024, 4096, 16384):
            tb.bench_kernel(T, "bf16")
    elif what.split("_")[0] in ("softmax", "regla") and what.split("_")[-1] in ("eager", "compile"):
        # softmax_eager, regla_compile, ..., and with _bf16_ in the middle (softmax_bf16_compile):
        # the same step under torch.autocast(bfloat16), as `linea bench train --precision bf16`.
        attn, prec, mode = what.split("_")[0], "bf16" if "_bf16_" in what else "fp32", what.split("_")[-1]
        tb.bench_train(attn, "fla" if attn == "regla" else "-", prec, mode == "compile", cfg)
    elif what == "decode":
        for attn in ("softmax", "regla"):
            for n in (512, 2048, 8192):
                dgb.graphed_decode(attn, n, maxT=n + 8)
