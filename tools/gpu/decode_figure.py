"""A Figure-5-style chart of `linea bench decode` results, as SVG (no plotting library needed):
against the context length, for each layer letter, the time to process the prompt (prefill), the
time per decoded token at batch 1 (from the CUDA graph where the letter has one, else eager:
each model's fastest path), and the peak memory while decoding at batch 1.

    python3 tools/gpu/decode_figure.py linea_decode.jsonl OUT.svg [LETTERS]   # LETTERS e.g. S,R,F
"""
import json
import math
import sys

PANELS = [("prefill_ms", "prompt processing (ms)"),
          ("decode_ms", "decode, batch 1 (ms per token)"),
          ("decode_b1_peak_mib", "peak memory, batch-1 decode (MiB)")]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
W, H, MARGIN = 330, 260, 52  # one panel; margins hold the axes' labels


def nice_ticks(top):
    """About five round ticks from 0 to at least top."""
    raw = top / 5
    step = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * step:
            step *= m
            break
    return [i * step for i in range(int(math.ceil(top / step)) + 1)]


def panel(x0, key, title, series, contexts):
    out = []
    top = max(r[key] for rows in series.values() for r in rows)
    ticks = nice_ticks(top)
    ymax = ticks[-1]
    lx = [math.log2(c) for c in contexts]
    def px(c):
        return x0 + MARGIN + (math.log2(c) - lx[0]) / max(lx[-1] - lx[0], 1e-9) * (W - MARGIN - 10)
    def py(v):
        return H - MARGIN + 20 - v / ymax * (H - MARGIN - 10)
    out.append(f'<text x="{x0 + W / 2}" y="14" text-anchor="middle" font-size="13">{title}</text>')
    for t in ticks:
        y = py(t)
        out.append(f'<line x1="{x0 + MARGIN}" y1="{y:.1f}" x2="{x0 + W - 10}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 + MARGIN - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10">{t:g}</text>')
    for c in contexts:
        x = px(c)
        out.append(f'<text x="{x:.1f}" y="{H - MARGIN + 36}" text-anchor="middle" font-size="10">{c}</text>')
    out.append(f'<text x="{x0 + W / 2 + 20}" y="{H - 4}" text-anchor="middle" font-size="11">context (tokens)</text>')
    for i, (letter, rows) in enumerate(series.items()):
        pts = " ".join(f"{px(r['context']):.1f},{py(r[key]):.1f}" for r in rows)
        color = COLORS[i % len(COLORS)]
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        for r in rows:
            out.append(f'<circle cx="{px(r["context"]):.1f}" cy="{py(r[key]):.1f}" r="3" fill="{color}"/>')
    return out


def main():
    path, svg_path = sys.argv[1], sys.argv[2]
    letters = sys.argv[3].split(",") if len(sys.argv) > 3 else None
    rows = [json.loads(line) for line in open(path) if line.strip()]
    series = {}
    for r in rows:
        if letters is None or r["letter"] in letters:
            series.setdefault(f'{r["letter"]} ({r["layer"]})', []).append(r)
    for v in series.values():
        v.sort(key=lambda r: r["context"])
        for r in v:
            r["decode_ms"] = r.get("decode_b1_graph_ms_per_step", r["decode_b1_ms_per_step"])
    contexts = sorted({r["context"] for v in series.values() for r in v})
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(PANELS)}" height="{H + 24}" '
             f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>']
    for i, (key, title) in enumerate(PANELS):
        parts += panel(i * W, key, title, series, contexts)
    for i, name in enumerate(series):
        x = 70 + i * 150
        parts.append(f'<rect x="{x}" y="{H + 8}" width="12" height="12" fill="{COLORS[i % len(COLORS)]}"/>')
        parts.append(f'<text x="{x + 16}" y="{H + 19}" font-size="12">{name}</text>')
    parts.append("</svg>")
    with open(svg_path, "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
