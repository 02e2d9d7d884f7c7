#!/usr/bin/env python3
"""The docs' commands, checked against the program (issue 26, part of "the docs are tests"):
every indented command block of README.md and docs/*.md is read, and each `clpipe ...` line
(continuations joined) must name a real subcommand; for train, eval and sample every flag must
be one that subcommand takes (a shortcut or a --section.key of its settings, as its --help lists
them); no command may use a `../shared/...` path (a clone has none: the data are under
tests/*/data); and every repository file a command names (tools/..., tests/.../data/...,
docs/...) must exist. This does not run the commands (that is the rest of the doc test, not
built yet). Usage: check_doc_commands.py CLPIPE REPO_ROOT"""
import re
import subprocess
import sys
from pathlib import Path

clpipe, root = sys.argv[1], Path(sys.argv[2])
top = subprocess.run([clpipe, "--help"], capture_output=True, text=True).stdout
subcommands = set(re.findall(r"^  ([a-z]+) ", top, re.M))
flags = {}
for cmd in ("train", "eval", "sample"):
    h = subprocess.run([clpipe, cmd, "--help"], capture_output=True, text=True).stdout
    m = re.search(r"^shortcuts:(.*)$", h, re.M)
    ok = set(m.group(1).split()) if m else set()
    ok |= set(re.findall(r"^  (--[a-z_]+\.[a-z_]+) ", h, re.M))
    ok |= {"--config", "--print-config", "--help", "--resume=auto"} | ({"--json"} if cmd == "eval" else set())
    # the settings of another command (clpipe refuses them on the command line)
    ok -= {"--sample.ckpt"} if cmd == "train" else {"--ckpt.dir", "--ckpt.resume", "--resume"}
    flags[cmd] = ok

def blocks(text):
    """Indented (4 spaces) blocks outside fenced ones, and fenced ``` blocks."""
    out, cur, fenced = [], [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            if not fenced and cur:
                out.append(cur)
                cur = []
            continue
        if fenced or line.startswith("    "):
            cur.append(line.strip())
        elif cur and line.strip():
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out

problems, checked = [], 0
for doc in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
    for block in blocks(doc.read_text()):
        joined, buf = [], ""
        for line in block:
            buf += line
            if buf.endswith("\\"):
                buf = buf[:-1] + " "
                continue
            joined.append(buf)
            buf = ""
        for cmdline in joined:
            code = cmdline.split(" #")[0]
            if "../shared/" in code:
                problems.append(f"{doc.name}: a path a clone has not: {cmdline}")
            for path in re.findall(r"(?<![\w/.])((?:tools|tests|docs)/[\w./-]+\.\w+)", code):
                if "*" not in path and "<" not in path and not (root / path).exists():
                    problems.append(f"{doc.name}: {path} does not exist: {cmdline}")
            # a command line: [VAR=x ...] [mpirun ... | timeout N] [path/]clpipe SUB ...
            m = re.match(r"(?:\S+=\S*\s+)*(?:mpirun\s.*?|timeout\s+\d+\s+)?(?:\S*/)?clpipe\s+"
                         r"([a-z]+)(.*)", code)
            if not m:
                continue
            sub, rest = m.group(1), m.group(2)
            checked += 1
            if sub not in subcommands:
                problems.append(f"{doc.name}: no subcommand '{sub}': {cmdline}")
                continue
            if sub not in flags:
                continue
            for f in re.findall(r"(?:^|\s)(--[A-Za-z0-9_.-]+(?:=auto)?)", rest):
                name = f if f == "--resume=auto" else f.split("=")[0]
                if name not in flags[sub]:
                    problems.append(f"{doc.name}: clpipe {sub} takes no {name}: {cmdline}")
for p in problems:
    print("FAIL:", p)
print(f"{checked} clpipe commands in the docs checked, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
