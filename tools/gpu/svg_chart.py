"""Line charts as plain SVG, so the benchmark figures need no plotting library: panels whose x axis
is logarithmic in base 2 (context lengths, GPU counts), one polyline with dots per series, and a
legend below. decode_figure.py and scaling_figure.py draw with it."""
import math

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


def panel(x0, title, x_label, xs, series, y_scale=1.0):
    """One panel at horizontal offset x0. xs: the x values to label; series: a list of
    (points, color, dashed) with points a list of (x, y); y is divided by y_scale for the ticks."""
    out = []
    top = max(y for points, _, _ in series for _, y in points) / y_scale
    ticks = nice_ticks(top)
    ymax = ticks[-1]
    lx = [math.log2(x) for x in xs]

    def px(x):
        return x0 + MARGIN + (math.log2(x) - lx[0]) / max(lx[-1] - lx[0], 1e-9) * (W - MARGIN - 10)

    def py(y):
        return H - MARGIN + 20 - y / y_scale / ymax * (H - MARGIN - 10)

    out.append(f'<text x="{x0 + W / 2}" y="14" text-anchor="middle" font-size="13">{title}</text>')
    for t in ticks:
        y = py(t * y_scale)
        out.append(f'<line x1="{x0 + MARGIN}" y1="{y:.1f}" x2="{x0 + W - 10}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 + MARGIN - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10">{t:g}</text>')
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{H - MARGIN + 36}" text-anchor="middle" font-size="10">{x}</text>')
    out.append(f'<text x="{x0 + W / 2 + 20}" y="{H - 4}" text-anchor="middle" font-size="11">{x_label}</text>')
    for points, color, dashed in series:
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        if not dashed:
            for x, y in points:
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}"/>')
    return out


def write(path, panels, legend):
    """panels: lists of SVG elements from panel(), side by side; legend: (name, color) pairs."""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(panels)}" height="{H + 24}" '
             f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>']
    for p in panels:
        parts += p
    spacing = min(150, (W * len(panels) - 70) // max(len(legend), 1))
    for i, (name, color) in enumerate(legend):
        x = 70 + i * spacing
        parts.append(f'<rect x="{x}" y="{H + 8}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{x + 16}" y="{H + 19}" font-size="12">{name}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")
