#!/usr/bin/env python3
"""Side-by-side table of clpeak's and `clpipe bench`'s figures (run by bench_vs_clpeak.sh).

usage: bench_vs_clpeak.py OUTDIR ROUNDS
OUTDIR holds clpeak.R.txt and clpipe.R.json for R = 1..ROUNDS (compute and bandwidth, the
tools alternating), plus clpeak.xfer.txt and clpipe.xfer.json (transfers, launch latency).
"""
import json
import re
import statistics
import sys

WIDTHS = ["float", "float2", "float4", "float8", "float16"]


def section(text, title):
    """The 'name : value' lines under a clpeak heading, as a dict."""
    m = re.search(re.escape(title) + r"[^\n]*\n((?:[ \t]+[^\n]*:[ \t]*[-0-9.]+[^\n]*\n)+)", text)
    vals = {}
    for line in (m.group(1).splitlines() if m else []):
        k, _, v = line.rpartition(":")
        try:
            vals[k.strip()] = float(v.split()[0])
        except (ValueError, IndexError):
            pass
    return vals


def stat_text(s):
    return "%8.2f [%7.2f .. %7.2f]" % (s["median"], s["min"], s["max"])


def same_method(out, rounds):
    peak, pipe = {}, {}  # figure -> clpeak means per round; clpipe stats per round
    name = "?"
    for r in range(1, rounds + 1):
        text = open("%s/clpeak.%d.txt" % (out, r)).read()
        prof = json.load(open("%s/clpipe.%d.json" % (out, r)))["devices"][0]
        name = prof["name"]
        sp = section(text, "Single-precision compute (GFLOPS)")
        bw = section(text, "Global memory bandwidth (GBPS)")
        for w in WIDTHS:
            for key, src, st in (("compute", sp, prof["compute"]["dependent_mad"].get(w)),
                                 ("read", bw, prof["bandwidth"]["read"].get(w))):
                if w in src:
                    peak.setdefault((key, w), []).append(src[w])
                if st:
                    pipe.setdefault((key, w), []).append(st)
    print("\nclpeak vs clpipe bench on %s: %d rounds, the two tools alternating" % (name, rounds))
    print("clpeak: median of its per-round figures (each a mean over its runs), [min .. max] "
          "over rounds")
    print("clpipe: median of its per-round medians, [min .. max] over every timed run\n")
    print("agree: clpeak's median lies within clpipe's measured spread (clpeak measures none of "
          "its own);\nthe last column says whether clpipe's median also lies within clpeak's "
          "range over rounds\n")
    print("%-28s %-26s %-26s %6s  %-6s %s" % ("same method", "clpeak", "clpipe", "ratio",
                                             "agree?", "in clpeak's range?"))
    agree = disagree = 0
    for kind, unit in (("compute", "GFLOP/s"), ("read", "GB/s")):
        for w in WIDTHS:
            key = (kind, w)
            if key not in peak or key not in pipe:
                continue
            pk, st = peak[key], pipe[key]
            p = {"median": statistics.median(pk), "min": min(pk), "max": max(pk)}
            c = {"median": statistics.median([s["median"] for s in st]),
                 "min": min(s["min"] for s in st), "max": max(s["max"] for s in st)}
            ok = c["min"] <= p["median"] <= c["max"]
            back = p["min"] <= c["median"] <= p["max"]
            agree += ok
            disagree += not ok
            label = "%s %s (%s)" % ("compute" if kind == "compute" else "read bw", w, unit)
            print("%-28s %s %s %6.2f  %-6s %s" % (label, stat_text(p), stat_text(c),
                                                  c["median"] / p["median"],
                                                  "yes" if ok else "NO", "yes" if back else "no"))
    print("\nsame-method figures: %d agree within clpipe's measured spread, %d do not"
          % (agree, disagree))
    return json.load(open("%s/clpipe.%d.json" % (out, rounds)))["devices"][0]


def other_method(out):
    text = open(out + "/clpeak.xfer.txt").read()
    prof = json.load(open(out + "/clpipe.xfer.json"))["devices"][0]
    xf = section(text, "Transfer bandwidth (GBPS)")
    lat = re.search(r"Kernel launch latency\s*:\s*([0-9.]+)", text)
    t = prof["transfer"]
    rows = [("h2d pageable (GB/s)", xf.get("enqueueWriteBuffer"), t["h2d"]["pageable"],
             "both: blocking clEnqueueWriteBuffer from malloc()ed memory"),
            ("d2h pageable (GB/s)", xf.get("enqueueReadBuffer"), t["d2h"]["pageable"],
             "both: blocking clEnqueueReadBuffer into malloc()ed memory"),
            ("h2d mapped (GB/s)", xf.get("memcpy to mapped ptr"), t["h2d"]["mapped"],
             "clpeak times the memcpy alone; clpipe map + memcpy + unmap"),
            ("d2h mapped (GB/s)", xf.get("memcpy from mapped ptr"), t["d2h"]["mapped"],
             "clpeak times the memcpy alone; clpipe map + memcpy + unmap"),
            ("launch queued->end (us)", float(lat.group(1)) if lat else None,
             prof["launch"]["queued_to_end"],
             "clpeak: mean, a 512-item read kernel; clpipe: median, an empty kernel")]
    print("\n%-28s %8s  %-26s %s" % ("method differs", "clpeak", "clpipe", "how"))
    for label, v, st, how in rows:
        print("%-28s %8s  %s %s" % (label, "-" if v is None else "%.2f" % v, stat_text(st), how))
    return prof


def extras(last, xfer):
    print("\nclpipe measures what clpeak does not:")
    ind = last["compute"]["independent_mad"]
    if ind["gflops"]:
        print("  compute, %d independent chains (float%d): %s GFLOP/s: what the FMA units do "
              "when fed, not the latency of one chain" % (ind["chains"], ind["width"],
                                                          stat_text(ind["gflops"])))
    for k in ("write", "copy"):
        best = last["bandwidth"][k]["best_width"]
        s = last["bandwidth"][k]["float%d" % best if best > 1 else "float"]
        if s:
            print("  %s bandwidth (float%d): %s GB/s" % (k, best, stat_text(s)))
    for d in ("h2d", "d2h"):
        s = xfer["transfer"][d]["pinned"]
        if s:
            print("  %s from pinned (CL_MEM_ALLOC_HOST_PTR) memory: %s GB/s" % (d, stat_text(s)))
    for k, what in (("queued", "launch, queued (per kernel of a batch)"),
                    ("roundtrip", "launch, round trip (enqueue + clFinish)")):
        s = xfer["launch"][k]
        if s:
            print("  %s: %s us" % (what, stat_text(s)))
    print("  and: a spread for every figure, the engine's GEMM at model shapes, MPI latency "
          "and bandwidth between ranks, a JSON device profile")


def main():
    out, rounds = sys.argv[1], int(sys.argv[2])
    last = same_method(out, rounds)
    xfer = other_method(out)
    extras(last, xfer)


if __name__ == "__main__":
    main()
