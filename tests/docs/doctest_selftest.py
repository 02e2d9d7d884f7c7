#!/usr/bin/env python3
"""The doc test's own test: tests/docs/doctest.py on tests/docs/selftest/ must pass the blocks
that run, report the failing one by file:line with its output, refuse a skip without a reason and
a stale replace, count the blocks, and pass on a README that gives the MPI settings beside its
first mpirun (and fail on one that does not). Usage: doctest_selftest.py BUILD_DIR"""
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

here = Path(__file__).resolve().parent
build = sys.argv[1]
fails = []


def run(root):
    r = subprocess.run([sys.executable, str(here / "doctest.py"), build, str(root)],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def want(cond, what, out):
    if not cond:
        fails.append(what)
        print(f"FAIL: {what}\n--- output:\n{out}")


with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp) / "repo"
    shutil.copytree(here / "selftest", root)
    (root / "tools").mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    rc, out = run(root)
    want(rc == 1, "exit 1 with failing blocks", out)
    want(re.search(r"^ok +docs/A.md:3 ", out, re.M), "the first block runs", out)
    want(re.search(r"^ok +docs/A.md:7 ", out, re.M), "a block sees the files of the one before", out)
    want(re.search(r"^ok +docs/A.md:11 +shrunk", out, re.M), "a replace shrinks a block", out)
    want(re.search(r"^FAIL +docs/A.md:16 +\(block at line 15", out, re.M),
         "the failing line is named by file:line", out)
    want("tools/none.sh: No such file" in out, "the failing block's output is shown", out)
    want("docs/A.md:18: 'skip' needs a reason" in out, "a skip without a reason fails", out)
    want(re.search(r"^skip +docs/A.md:24 +\(a reason\)", out, re.M), "a skip with a reason", out)
    want("'--steps 40' is not in the block" in out, "a stale replace fails", out)
    want(re.search(r"^ok +docs/A.md:32 ", out, re.M), "status and expect of a $ block", out)
    want(re.search(r"^ok +README.md:3 ", out, re.M), "README's block runs", out)
    want(re.search(r"^\d+ command blocks: 5 run, 1 shrunk, 1 skipped; 1 text blocks", out, re.M), "text blocks counted", out)
    want("mpirun first appears" not in out, "the MPI settings are found", out)
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ", ""))
    rc, out = run(root)
    want("README.md:4: mpirun first appears here, but the lines around it lack "
         "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in out, "missing MPI settings are reported", out)
print(f"doctest self-test: {len(fails)} failure(s)")
sys.exit(1 if fails else 0)
