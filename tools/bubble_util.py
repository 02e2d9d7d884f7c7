#!/usr/bin/env python3
"""Bubble utilisation of the optimizer's work in a measured trace (--train.trace's Chrome JSON;
docs/OPTIMIZERS.md, "Where Muon's work runs").

Definition. A step of the trace is cut at the end of its optimizer steps (the k-th group of
OPT_STEP events in time order, as the SVG draws step ends). In a step, the schedule's window
is [first start, last end] of the pipeline's own compute ops (FWD, BWD, BWD_B, BWD_W) over all
ranks; a rank's idle gaps are the parts of the window where that rank runs none of them (the
bubbles the schedule leaves). The optimizer's work is the compute-queue events of OPT_PREP,
OPT_STEP and the K-FAC items (KFAC_CURV_A/B, KFAC_INV, KFAC_PRECOND). Then

    utilisation = sum over steps and ranks of |optimizer work inside the gaps|
                  / sum over steps and ranks of |gaps|

Work after the window (after every rank's last backward: the norm, AdamW's step, a Muon step
of the stage that finished last) is in no bubble and counts nothing. Times are measured on the
device (markers), so a loaded machine's noise is in them.

Usage: tools/bubble_util.py TRACE.json [TRACE.json ...]   (one line per trace; --ranks: also
per rank)"""
import json
import sys

BASE = {"FWD", "BWD", "BWD_B", "BWD_W"}
OPT = {"OPT_PREP", "OPT_STEP", "KFAC_CURV_A", "KFAC_CURV_B", "KFAC_INV", "KFAC_PRECOND"}


def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def gaps(window, busy):
    lo, hi = window
    out, t = [], lo
    for a, b in union(busy):
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        if a > t:
            out.append((t, a))
        t = max(t, b)
    if hi > t:
        out.append((t, hi))
    return out


def overlap(iv, gs):
    tot = 0.0
    for a, b in union(iv):
        for c, d in gs:
            tot += max(0.0, min(b, d) - max(a, c))
    return tot


def load(path):
    d = json.load(open(path))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    out = []
    for e in ev:
        if e.get("ph") != "X" or e.get("tid") != 0:  # the compute queue
            continue
        k = e.get("args", {}).get("kind", e.get("cat", ""))
        out.append((e["pid"], k, e["ts"] * 1e-3, (e["ts"] + e["dur"]) * 1e-3,  # ms
                    e.get("args", {}).get("stage", -1)))
    return out


def analyse(path):
    ev = load(path)
    ranks = sorted({e[0] for e in ev})
    opt_ends = sorted(e[3] for e in ev if e[1] == "OPT_STEP")
    # steps: the OPT_STEPs a rank ran over the trace / the stages it steps (the fewest)
    count, stages = {}, {}
    for e in ev:
        if e[1] == "OPT_STEP":
            count[e[0]] = count.get(e[0], 0) + 1
            stages.setdefault(e[0], set()).add(e[4])
    nsteps = max(1, min(count[r] // len(stages[r]) for r in count) if count else 1)
    per_step = len(opt_ends) // nsteps if opt_ends else 0
    bounds = [opt_ends[(k + 1) * per_step - 1] for k in range(nsteps)] if per_step else []
    bounds = [-1e300] + bounds[:-1] + [1e300]
    gap_t = {r: 0.0 for r in ranks}
    use_t = {r: 0.0 for r in ranks}
    for k in range(len(bounds) - 1):
        lo, hi = bounds[k], bounds[k + 1]
        sev = [e for e in ev if lo < e[2] <= hi]
        base = [e for e in sev if e[1] in BASE]
        if not base:
            continue
        win = (min(e[2] for e in base), max(e[3] for e in base))
        for r in ranks:
            g = gaps(win, [(e[2], e[3]) for e in base if e[0] == r])
            gap_t[r] += sum(b - a for a, b in g)
            use_t[r] += overlap([(e[2], e[3]) for e in sev if e[0] == r and e[1] in OPT], g)
    G, U = sum(gap_t.values()), sum(use_t.values())
    return nsteps, G, U, gap_t, use_t


def main(argv):
    per_rank = "--ranks" in argv
    for path in [a for a in argv if a != "--ranks"]:
        nsteps, G, U, gap_t, use_t = analyse(path)
        print(f"{path}: {nsteps} step(s), gaps {G:.2f} ms, optimizer work in them {U:.2f} ms, "
              f"utilisation {100 * U / G if G > 0 else 0:.1f} %")
        if per_rank:
            for r in sorted(gap_t):
                print(f"  rank {r}: gaps {gap_t[r]:.2f} ms, work in them {use_t[r]:.2f} ms")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
