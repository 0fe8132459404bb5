"""The data-parallel scaling chart of docs/benchmarks.md, as SVG: tokens/s against the number of
GPUs for each model, beside the ideal line (N times one GPU's plain step, the one a run without
--gpus takes), and the efficiency (tokens/s over that ideal), from the JSON lines
tools/gpu/scaling.sh writes. Runs of two "hosts" over NCCL's socket transport are their own
series.

    python3 tools/gpu/scaling_figure.py scaling.jsonl OUT.svg
"""
import json
import sys

import svg_chart


def plain_tok_s(rows):
    """Each model's tokens/s on one GPU's plain step: the --gpus 1 run's step timed alone, without
    collectives (scaling.sh's baseline too)."""
    return {r["model"]: r["B"] * r["T"] / r["alone_step_ms"] * 1000 for r in rows
            if r["gpus"] == 1 and r["transport"] == "default"}


def main():
    path, svg_path = sys.argv[1], sys.argv[2]
    rows = [json.loads(line) for line in open(path) if line.strip()]
    plain = plain_tok_s(rows)
    gpus = sorted({r["gpus"] for r in rows})
    speed, efficiency, legend = [], [], []
    for i, model in enumerate(sorted(plain)):
        for k, (transport, suffix) in enumerate((("default", ""), ("socket", ", sockets"))):
            runs = sorted((r["gpus"], r["tok_s"]) for r in rows if r["model"] == model and r["transport"] == transport)
            if not runs:
                continue
            color = svg_chart.COLORS[(i + 2 * k) % len(svg_chart.COLORS)]
            speed.append((runs, color, False))
            efficiency.append(([(n, tok_s / (n * plain[model])) for n, tok_s in runs], color, False))
            legend.append((model + suffix, color))
        ideal_color = svg_chart.COLORS[i % len(svg_chart.COLORS)]
        speed.append(([(n, n * plain[model]) for n in gpus], ideal_color, True))
    efficiency.append(([(gpus[0], 1.0), (gpus[-1], 1.0)], "#888", True))
    panels = [svg_chart.panel(0, "tokens/s (millions); dashed: ideal", "GPUs", gpus, speed, y_scale=1e6),
              svg_chart.panel(svg_chart.W, "efficiency (of N x one GPU)", "GPUs", gpus, efficiency)]
    svg_chart.write(svg_path, panels, legend)


if __name__ == "__main__":
    main()
