#!/usr/bin/env python3
"""The docs are tests (issue 26): every command block of README.md and docs/*.md runs.

A block is an indented (4 spaces, after a blank line) or fenced (```) block. It is a command
block when its first line starts as a command does (`clpipe SUB`, `build/...`, `tools/...`,
`mpirun`, `VAR=value cmd`, `$ cmd`, `cat >`, ...; a fence tagged sh/bash/shell/console always
is); other blocks (output, JSON, TOML, diagrams) are text and are only counted. A `$ `-style
block runs its `$ ` lines and treats the rest as their output.

Each document's command blocks run in order, as one user would type them, in a fresh scratch
directory that looks like a clean clone: the tracked top-level files and folders of the
repository as symlinks, `build/tools/clpipe` -> the clpipe under test (its folder is also
first on PATH),
and the small example inputs the docs take for granted (my.toml, train.toml, cfg.toml,
run.toml: the tiny config in tests/docs/fixture/tiny.toml; text.txt: the docs' own text).
A block runs under `bash -e`; the first failing line fails the test with its file:line and the
block's output. The environment has Open MPI's settings for root and oversubscription
(OMPI_ALLOW_RUN_AS_ROOT=1 ...), POCL_MAX_PTHREAD_COUNT=1, and the kernel caches of the caller.

A marker, an HTML comment on the line before the block (a blank line between them is allowed),
changes how a block runs; rendered markdown shows nothing of it:

    <!-- doctest: skip (why it cannot run here) -->      a reason is required
    <!-- doctest: replace "--steps 40" "--steps 4" -->   shrink: the text must occur in the block
    <!-- doctest: env RUSTICL_ENABLE=llvmpipe -->        extra environment for the block
    <!-- doctest: before "clpipe train --config my.toml --ckpt.dir=ckpt" -->  set-up first
    <!-- doctest: status 1; expect "the model does not fit" -->  the block must fail so

Directives are separated by `;` and may repeat; `skip (...)` stands alone. Usage:
    doctest.py CLPIPE_BUILD_DIR REPO_ROOT [--only FILE[:LINE]] [--list] [--keep]
Exit 0 when every command block ran or is skipped with a reason, and README.md names Open MPI's
root settings beside the first mpirun; 1 otherwise."""
import atexit
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = re.compile(r"(\$ |clpipe [a-z]+(?![a-z:])|build/|tools/|mpirun |srun |cat >|cd |export |"
                     r"#SBATCH|cmake |ctest |python3 |git |echo |grep |true$|ls |cp |mkdir |rm |sed |head |tail |"
                     r"lstopo |[A-Z][A-Z0-9_]*=\S*\s)")
SHELL_FENCES = {"sh", "bash", "shell", "console"}
BLOCK_TIMEOUT = 300


def parse_blocks(path):
    """[(line, lines, fence_info, marker_text, marker_line)] for every block of one file."""
    lines = path.read_text().splitlines()
    out, n = [], 0
    while n < len(lines):
        line = lines[n]
        start, body, info = None, None, None
        if line.lstrip().startswith("```"):
            info = line.strip()[3:].strip()
            end = n + 1
            while end < len(lines) and not lines[end].lstrip().startswith("```"):
                end += 1
            start, body = n + 1, lines[n + 1:end]
            nxt = end + 1
        elif line.startswith("    ") and line.strip() and (n == 0 or not lines[n - 1].strip()):
            end = n
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            while end > n and not lines[end - 1].strip():
                end -= 1
            start, body = n + 1, [l[4:] for l in lines[n:end]]
            nxt = end
        else:
            n += 1
            continue
        # the marker: the nearest non-blank line above the block ends an HTML comment
        marker, mline, k = None, None, n - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and lines[k].rstrip().endswith("-->"):
            j = k
            while j >= 0 and "<!--" not in lines[j]:
                j -= 1
            text = " ".join(l.strip() for l in lines[j:k + 1])
            m = re.match(r"<!--\s*doctest:(.*)-->$", text)
            if m:
                marker, mline = m.group(1).strip(), j + 1
        out.append((start, body, info, marker, mline))
        n = nxt
    return out


def is_command(body, info):
    first = next((l.strip() for l in body if l.strip()), "")
    if info is not None and info.split()[:1] and info.split()[0] in SHELL_FENCES:
        return True
    return bool(COMMAND.match(first))


def parse_marker(text, where):
    """{'skip': reason|None, 'replace': [(a, b)], 'env': {}, 'before': [], 'status': int,
    'expect': []}; raises ValueError naming the problem."""
    d = {"skip": None, "replace": [], "env": {}, "before": [], "status": 0, "expect": []}
    if text.startswith("skip"):  # the whole marker: its reason may hold any text
        m = re.match(r"skip\s*\((.*\S.*)\)$", text)
        if not m:
            raise ValueError(f"{where}: 'skip' needs a reason in parentheses: {text}")
        d["skip"] = m.group(1)
        return d
    for part in filter(None, (p.strip() for p in text.split(";"))):
        word, _, rest = part.partition(" ")
        args = shlex.split(rest)
        if word == "replace" and len(args) == 2:
            d["replace"].append((args[0], args[1]))
        elif word == "env" and args and all("=" in a for a in args):
            d["env"].update(a.split("=", 1) for a in args)
        elif word == "before" and len(args) == 1:
            d["before"].append(args[0])
        elif word == "status" and len(args) == 1 and args[0].isdigit():
            d["status"] = int(args[0])
        elif word == "expect" and len(args) == 1:
            d["expect"].append(args[0])
        else:
            raise ValueError(f"{where}: unknown doctest directive: {part}")
    return d


def script_of(body):
    """The shell text of a block: `$ ` lines only when it has any (the rest is output)."""
    if any(l.startswith("$ ") for l in body):
        out, cont = [], False
        for l in body:
            if l.startswith("$ ") or cont:
                out.append(l[2:] if l.startswith("$ ") else l)
                cont = l.rstrip().endswith("\\")
            else:
                out.append("")  # keep the line numbers
        return out
    return list(body)


def make_scratch(root, build, base):
    scratch = Path(tempfile.mkdtemp(prefix="doc-", dir=base))
    tracked = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True)
    tops = {p.split("/")[0] for p in tracked.stdout.split()} if tracked.returncode == 0 else \
        {p.name for p in root.iterdir() if not p.name.startswith(".") or p.name == ".ci"}
    for name in sorted(tops - {"build"}):
        if (root / name).exists():
            (scratch / name).symlink_to(root / name)
    # build/tools/clpipe only: a block that configured build/ through a link to the real tree
    # would rewrite that tree's source directory to the scratch one
    (scratch / "build" / "tools").mkdir(parents=True)
    (scratch / "build" / "tools" / "clpipe").symlink_to(build / "tools" / "clpipe")
    for name in ("my.toml", "train.toml", "cfg.toml", "run.toml"):
        shutil.copy(Path(__file__).resolve().parent / "fixture" / "tiny.toml", scratch / name)
    with open(scratch / "text.txt", "w") as f:
        for doc in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
            f.write(doc.read_text())
    return scratch


def readme_mpi_settings(root):
    """README.md must give Open MPI's settings for root and oversubscription within 4 lines of
    where `mpirun` first appears."""
    lines = (root / "README.md").read_text().splitlines()
    first = next((i for i, l in enumerate(lines) if "mpirun" in l), None)
    if first is None:
        return None
    section = "\n".join(lines[max(0, first - 4):first + 5])
    need = ["OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
            "OMPI_MCA_rmaps_base_oversubscribe=1"]
    missing = [w for w in need if w not in section]
    if missing:
        return f"README.md:{first + 1}: mpirun first appears here, but the lines around it lack " + \
               ", ".join(missing)
    return None


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        return 2
    build, root = Path(args[0]).resolve(), Path(args[1]).resolve()
    only = args[args.index("--only") + 1] if "--only" in args else None
    listing, keep = "--list" in args, "--keep" in args
    clpipe = build / "tools" / "clpipe"
    if not clpipe.exists() and not listing:
        print(f"doctest: {clpipe}: no such program (build first)")
        return 1
    env = dict(os.environ)
    env["PATH"] = f"{build / 'tools'}:{env.get('PATH', '')}"
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", POCL_MAX_PTHREAD_COUNT="1")
    for k in ("CLPIPE_CACHE_DIR", "POCL_CACHE_DIR", "MESA_SHADER_CACHE_DIR"):
        env.setdefault(k, str(root / ".cache" / k.split("_")[0].lower()))
    env.pop("CLPIPE_DEVICE", None)

    problems, counts, skips = [], {"text": 0, "run": 0, "shrunk": 0, "skipped": 0}, {}
    mpi = readme_mpi_settings(root)
    if mpi:
        problems.append(mpi)
    base = tempfile.mkdtemp(prefix="clpipe-doctest-")
    if not keep:  # also when a block's output or a marker raises
        atexit.register(shutil.rmtree, base, ignore_errors=True)
    t0 = time.time()
    docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    for doc in docs:
        rel = doc.relative_to(root)
        if only and not str(only).split(":")[0] in (str(rel), doc.name):
            continue
        scratch = None
        for start, body, info, marker_text, mline in parse_blocks(doc):
            where = f"{rel}:{start}"
            if only and ":" in only and str(start) != only.split(":")[1]:
                continue
            if not is_command(body, info):
                counts["text"] += 1
                if marker_text is not None:
                    problems.append(f"{rel}:{mline}: a doctest marker on a block that is not a command")
                continue
            try:
                mk = parse_marker(marker_text or "", f"{rel}:{mline}")
            except ValueError as e:
                problems.append(str(e))
                print(f"FAIL  {e}")
                continue
            if mk["skip"]:
                counts["skipped"] += 1
                skips.setdefault(mk["skip"], []).append(where)
                print(f"skip  {where}  ({mk['skip']})")
                continue
            text = "\n".join(script_of(body))
            bad = [a for a, _ in mk["replace"] if a not in text]
            if bad:
                problems.append(f"{where}: doctest replace: {bad[0]!r} is not in the block (a stale marker)")
                print(f"FAIL  {where}  replace {bad[0]!r}: not in the block")
                continue
            for a, b in mk["replace"]:
                text = text.replace(a, b)
            counts["shrunk" if mk["replace"] else "run"] += 1
            if listing:
                print(f"{'shrunk' if mk['replace'] else 'run':7}{where}")
                continue
            if scratch is None:
                scratch = make_scratch(root, build, base)
            pre = ["set -e", "trap 'echo \"doctest: block line $((LINENO - __OFF)) failed, "
                   "exit $?\" >&2' ERR"] + mk["before"]
            pre.insert(0, f"__OFF={len(pre) + 1}")
            script = "\n".join(pre) + "\n" + text + "\n"
            benv = dict(env, **mk["env"])
            t = time.time()
            try:
                r = subprocess.run(["bash", "-c", script], cwd=scratch, env=benv, encoding="utf-8", errors="replace",
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   timeout=BLOCK_TIMEOUT)
                status, output = r.returncode, r.stdout
            except subprocess.TimeoutExpired as e:
                status, output = "timeout", (e.stdout or b"").decode(errors="replace") \
                    if isinstance(e.stdout, bytes) else (e.stdout or "")
            dt = time.time() - t
            ok = status == mk["status"] and all(x in output for x in mk["expect"])
            tag = "shrunk" if mk["replace"] else "run"
            if ok:
                print(f"ok    {where}  {tag} {dt:.1f} s")
                continue
            m = re.search(r"doctest: block line (\d+) failed", output)
            line = start + int(m.group(1)) - 1 if m else start
            why = f"exit {status}, expected {mk['status']}" if status != mk["status"] else \
                "its output lacks " + ", ".join(repr(x) for x in mk["expect"] if x not in output)
            problems.append(f"{rel}:{line}: block at line {start}: {why}")
            print(f"FAIL  {rel}:{line}  (block at line {start}, {tag}, {dt:.1f} s): {why}; output:")
            print("\n".join("    | " + l for l in output.splitlines()[-40:]))
    if keep:
        print(f"scratch directories kept under {base}")
    total = counts["run"] + counts["shrunk"] + counts["skipped"]
    print(f"\n{total} command blocks: {counts['run']} run, {counts['shrunk']} shrunk, "
          f"{counts['skipped']} skipped; {counts['text']} text blocks; {time.time() - t0:.0f} s")
    for reason, where in sorted(skips.items()):
        print(f"  skipped ({reason}): {', '.join(where)}")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
