#!/usr/bin/env python3
"""Convergence plot and table for tools/pipefisher_convergence.sh, standard library only.

Reads clpipe train JSON-lines logs (one per run, given as LABEL=PATH), and writes an SVG with
validation loss against step and against training time (the sum of the logged step times, so
start-up and evaluation are left out), and prints a Markdown table: the first evaluation at or
below the target validation loss, its step and its training time.

usage: pipefisher_plot.py --target LOSS --svg OUT.svg LABEL=LOG [LABEL=LOG ...]
"""
import argparse
import json
import sys

COLOURS = ["#4c78a8", "#e45756", "#b279a2", "#54a24b", "#f58518"]


def read_log(path):
    """[(step, seconds of training so far, val_loss)] from the eval records."""
    t = 0.0
    points = []
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("event") == "step":
                t += rec["ms"] / 1000.0
            elif rec.get("event") == "eval":
                points.append((rec["step"], t, rec["val_loss"]))
    return points


def panel(x0, y0, w, h, series, xi, xlabel, target, ylo, yhi):
    xmax = max(p[xi] for _, pts in series for p in pts) or 1.0
    out = ['<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#888"/>'
           % (x0, y0, w, h)]

    def px(v):
        return x0 + w * v / xmax

    def py(v):
        return y0 + h * (yhi - v) / (yhi - ylo)

    for k in range(6):
        yv = ylo + (yhi - ylo) * k / 5
        out.append('<text x="%g" y="%g" font-size="11" text-anchor="end">%.2f</text>'
                   % (x0 - 4, py(yv) + 4, yv))
        xv = xmax * k / 5
        out.append('<text x="%g" y="%g" font-size="11" text-anchor="middle">%.4g</text>'
                   % (px(xv), y0 + h + 15, xv))
    out.append('<text x="%g" y="%g" font-size="12" text-anchor="middle">%s</text>'
               % (x0 + w / 2, y0 + h + 32, xlabel))
    if ylo < target < yhi:
        out.append('<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#999" stroke-dasharray="4 3"/>'
                   % (x0, py(target), x0 + w, py(target)))
    for i, (label, pts) in enumerate(series):
        c = COLOURS[i % len(COLOURS)]
        path = " ".join("%s%.1f,%.1f" % ("M" if j == 0 else "L", px(p[xi]), py(p[2]))
                        for j, p in enumerate(pts))
        out.append('<path d="%s" fill="none" stroke="%s" stroke-width="2"/>' % (path, c))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=float, required=True)
    ap.add_argument("--svg", required=True)
    ap.add_argument("--title", default="validation loss")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    series = []
    for r in a.runs:
        label, path = r.split("=", 1)
        series.append((label, read_log(path)))
    vals = [p[2] for _, pts in series for p in pts]
    if not vals:
        sys.exit("no evaluations in the logs")
    ylo, yhi = min(vals + [a.target]), max(vals)
    pad = 0.05 * (yhi - ylo or 1)
    ylo, yhi = ylo - pad, yhi + pad
    W, H = 960, 400
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="20" y="24" font-size="15" font-weight="bold">%s (target %.3g, dashed)</text>'
           % (a.title, a.target)]
    svg += panel(70, 50, 380, 270, series, 0, "step", a.target, ylo, yhi)
    svg += panel(550, 50, 380, 270, series, 1, "training time (s)", a.target, ylo, yhi)
    for i, (label, _) in enumerate(series):
        x = 70 + 220 * i
        svg.append('<rect x="%d" y="%d" width="14" height="4" fill="%s"/>'
                   % (x, H - 22, COLOURS[i % len(COLOURS)]))
        svg.append('<text x="%d" y="%d" font-size="12">%s</text>' % (x + 20, H - 16, label))
    svg.append("</svg>")
    with open(a.svg, "w") as f:
        f.write("\n".join(svg) + "\n")
    print("| run | steps to val loss <= %.3g | training time (s) | final val loss |" % a.target)
    print("|---|---|---|---|")
    for label, pts in series:
        hit = next((p for p in pts if p[2] <= a.target), None)
        final = pts[-1][2] if pts else float("nan")
        if hit:
            print("| %s | %d | %.1f | %.4f |" % (label, hit[0], hit[1], final))
        else:
            print("| %s | not reached | - | %.4f |" % (label, final))


if __name__ == "__main__":
    main()
