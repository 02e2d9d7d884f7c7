#!/bin/sh
# The config text stored in every checkpoint is valid TOML: Python's tomllib reads it, with the
# same values clpipe's reader gets (test_io_config checks the round trip through clpipe's).
set -eu
test_bin=$1
out=$(mktemp /tmp/clpipe-toml-XXXXXX)
trap 'rm -f "$out"' EXIT
CLPIPE_TEST_TOML_OUT=$out "$test_bin" test_stored_config
python3 - "$out" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    t = tomllib.load(f)
assert t["sample"]["prompt"] == ' The "end"\n\\ ', repr(t["sample"]["prompt"])
assert t["pipeline"]["layers"] == [2, 2] and t["pipeline"]["pipefisher"] is False, t["pipeline"]
assert t["model"]["preset"] == "gpt2" and t["optim"]["lr"] == 1e-3, t["model"]
print("tomllib reads the stored config:", len(t), "sections")
PY
