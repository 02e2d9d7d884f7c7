#!/usr/bin/env python3
"""Each message of a clpipe trace (--train.trace, Chrome JSON) against the simulator's link
model: every directed pair of ranks is one first-come-first-served link, so a message posted at
p ends at max(p, the link's last end) + BYTES / BPS. Prints, per link, how much later the
receives completed than that (a link sitting idle, or messages queueing on something the model
does not have), and with --each every message. Then, per rank, how long its forwards and
backwards started after they could have (the previous compute op done and the input received):
what the executor or a starved core adds.

Usage: tools/trace_links.py TRACE BYTES BPS [--each]
  BYTES: bytes per message (all messages the same size, as in tools/bench_net.sh)
  BPS:   the link's bytes/s (e.g. bandwidth_Bps from `clpipe bench --cluster-out`)
Ranks are hosts here (tools/bench_net.sh runs one rank per host)."""
import json
import sys
from collections import defaultdict


def main(argv):
    if len(argv) not in (4, 5) or (len(argv) == 5 and argv[4] != '--each'):
        sys.exit(__doc__)
    path, nbytes, bps = argv[1], float(argv[2]), float(argv[3])
    each = len(argv) == 5
    try:
        with open(path) as f:
            events = json.load(f)['traceEvents']
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f'{path}: not a clpipe trace ({e})')
    occ = nbytes / bps * 1e3  # ms
    spans = [e for e in events if e.get('ph') == 'X']
    recvs = defaultdict(list)  # (receiver, sender, ACT|GRAD, mb) -> receives, in time order
    for e in spans:
        if e['cat'].startswith('RECV_'):
            recvs[(e['pid'], e['args']['peer'], e['cat'][5:], e['args']['mb'])].append(e)
    for v in recvs.values():
        v.sort(key=lambda e: e['ts'])
    links = defaultdict(list)
    for s in sorted((e for e in spans if e['cat'].startswith('SEND_')), key=lambda e: e['ts']):
        key = (s['args']['peer'], s['pid'], s['cat'][5:], s['args']['mb'])
        if not recvs[key]:
            sys.exit(f'{path}: rank {s["pid"]} sends {s["name"]} ({s["cat"]}) to rank '
                     f'{key[0]}, which has no matching receive')
        r = recvs[key].pop(0)
        links[(s['pid'], key[0])].append((s['ts'] / 1e3, (r['ts'] + r['dur']) / 1e3, s['cat'][5:],
                                          s['args']['mb']))
    print(f'{nbytes:.0f} bytes at {bps * 8 / 1e6:.1f} Mbit/s: {occ:.1f} ms a message')
    for (a, b), msgs in sorted(links.items()):
        free, late = -1e300, []
        for posted, end, kind, mb in msgs:
            ideal = max(posted, free) + occ
            free = max(ideal, end)  # the link is busy until the message is in
            late.append(end - ideal)
            if each:
                print(f'  {a}->{b} {kind} mb {mb}: posted {posted:9.1f}, ideal end {ideal:9.1f}, '
                      f'received {end:9.1f} ms ({end - ideal:+.1f})')
        print(f'rank {a} -> {b}: {len(msgs)} messages, received {sum(late) / len(late):+.1f} ms '
              f'after the model on average (min {min(late):+.1f}, max {max(late):+.1f})')
    arrived = {}  # (rank, ACT|GRAD, mb, stage) -> when the receive completed
    for e in spans:
        if e['cat'].startswith('RECV_'):
            arrived[(e['pid'], e['cat'][5:], e['args']['mb'], e['args']['stage'])] = \
                (e['ts'] + e['dur']) / 1e3
    ranks = defaultdict(list)
    for e in spans:
        if e['cat'] in ('FWD', 'BWD'):
            ranks[e['pid']].append(e)
    for r, ops in sorted(ranks.items()):
        prev, total, worst = None, 0.0, 0.0
        for e in sorted(ops, key=lambda e: e['ts']):
            need = arrived.get((r, 'ACT' if e['cat'] == 'FWD' else 'GRAD', e['args']['mb'],
                                e['args']['stage']), 0.0)
            ready = max(prev if prev is not None else e['ts'] / 1e3, need)
            total += max(e['ts'] / 1e3 - ready, 0.0)
            worst = max(worst, e['ts'] / 1e3 - ready)
            prev = (e['ts'] + e['dur']) / 1e3
        print(f'rank {r}: {len(ops)} forwards and backwards started {total:.1f} ms after they '
              f'could have in all (at most {worst:.1f} ms)')


if __name__ == '__main__':
    main(sys.argv)
