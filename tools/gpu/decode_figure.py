"""A Figure-5-style chart of `linea bench decode` results, as SVG (no plotting library needed):
against the context length, for each layer letter, the time to process the prompt (prefill), the
time per decoded token at batch 1 (from the CUDA graph where the letter has one, else eager:
each model's fastest path), and the peak memory while decoding at batch 1.

    python3 tools/gpu/decode_figure.py linea_decode.jsonl OUT.svg [LETTERS]   # LETTERS e.g. S,R,F
"""
import json
import sys

import svg_chart

PANELS = [("prefill_ms", "prompt processing (ms)"),
          ("decode_ms", "decode, batch 1 (ms per token)"),
          ("decode_b1_peak_mib", "peak memory, batch-1 decode (MiB)")]


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
    colors = [svg_chart.COLORS[i % len(svg_chart.COLORS)] for i in range(len(series))]
    panels = []
    for i, (key, title) in enumerate(PANELS):
        lines = [([(r["context"], r[key]) for r in rows], color, False)
                 for rows, color in zip(series.values(), colors)]
        panels.append(svg_chart.panel(i * svg_chart.W, title, "context (tokens)", contexts, lines))
    svg_chart.write(svg_path, panels, list(zip(series, colors)))


if __name__ == "__main__":
    main()
