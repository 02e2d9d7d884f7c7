#!/usr/bin/env bash
# The layer check: reads every #include "..." under cl/ topology/ engine/ tools/ tests/ and fails
# on an include that goes up or sideways in the layer table below, and on any cycle between
# folders, printing file:line for each. docs/DESIGN.md draws the same table.
# It also keeps the OpenCL-free part OpenCL-free: the base layer (cl/base) and the engine core
# (clp_engine_core: the folders and model files that engine/CMakeLists.txt lists in
# CLP_CORE_DIRS and CLP_CORE_MODEL) may include only each other's headers, never another
# cl/ header, <CL/...> or <clblast...>.
#
# Usage: tools/check_layers.sh [ROOT]        check the tree at ROOT (default: this repository)
#        tools/check_layers.sh --self-test   show that the check fails on a deliberately added
#                                            upward include and on a folder cycle (temporary copy)
set -euo pipefail

# Lowest layer first. A folder may include its own headers and those of any folder on a lower
# line; never one on its own line (a sibling) or above. A folder not listed belongs to the
# nearest listed folder above it (cl/ref is part of cl, tests/* of tests). cl/kernels is the
# device source, below everything: cl/base/rng.c compiles its philox.clh as host C.
LAYERS='
cl/kernels
cl/base
cl
topology/comm
topology
engine/io
engine/model engine/data engine/sched
engine/optim engine/scenario
engine/sim
engine/pass
engine/skip
engine/exec
engine/train
engine/plan
tools tests
'

# The OpenCL-free folders and files (besides the engine core's, read from engine/CMakeLists.txt).
NOCL_BASE='cl/base cl/kernels/philox.clh'

# the engine core: CLP_CORE_DIRS as engine/ folders, CLP_CORE_MODEL's .c files and their headers
nocl_units() {
	local root=$1 cm=$1/engine/CMakeLists.txt d f
	[ -f "$cm" ] || { echo "layers: $cm not found (the engine core's folders)" >&2; return 1; }
	echo "$NOCL_BASE"
	for d in $(sed -n 's/^set(CLP_CORE_DIRS \(.*\))$/\1/p' "$cm"); do echo "engine/$d"; done
	for f in $(sed -n 's/^set(CLP_CORE_MODEL \(.*\))$/\1/p' "$cm"); do
		echo "engine/$f"
		[ -f "$root/engine/${f%.c}.h" ] && echo "engine/${f%.c}.h"
	done
	return 0
}

check() {
	local root=$1 nocl
	nocl=$(nocl_units "$root" | tr '\n' ' ')
	case "$nocl" in *engine/sim*) ;; *) echo "layers: engine/CMakeLists.txt names no CLP_CORE_DIRS"; return 1 ;; esac
	(cd "$root" && grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("|<(CL/|clblast))' \
		--include='*.c' --include='*.h' cl topology engine tools tests 2>/dev/null || true) |
	awk -v layers="$LAYERS" -v root="$root" -v nocl="$nocl" '
	# in the OpenCL-free part: under a listed folder, or a listed file
	function is_nocl(path,    d) {
		for (d in nocl_set)
			if (index(path, d "/") == 1 || path == d)
				return 1
		return 0
	}
	function unit_of(path,    d, best) {
		# the longest listed folder that is a prefix of path (a file path or a folder)
		best = ""
		for (d in level)
			if ((index(path, d "/") == 1 || path == d) && length(d) > length(best))
				best = d
		return best
	}
	# depth-first search for a cycle in the folder graph; prints each cycle once
	function dfs(u,    v, i, k, n) {
		color[u] = 1
		stack[++depth] = u
		n = nout[u]
		for (i = 1; i <= n; i++) {
			v = out[u, i]
			if (color[v] == 1) {
				msg = "layers: folder cycle:"
				for (k = depth; k >= 1 && stack[k] != v; k--) ;
				for (; k <= depth; k++) {
					nxt = (k < depth) ? stack[k + 1] : v
					msg = msg "\n  " stack[k] " -> " nxt "  (" where[stack[k], nxt] ")"
				}
				print msg
				bad = 1
			} else if (color[v] == 0) {
				dfs(v)
			}
		}
		depth--
		color[u] = 2
	}
	BEGIN {
		m = split(nocl, f, " ")
		for (j = 1; j <= m; j++) nocl_set[f[j]] = 1
		n = split(layers, lines, "\n")
		lv = 0
		for (i = 1; i <= n; i++) {
			m = split(lines[i], f, " ")
			if (m == 0) continue
			for (j = 1; j <= m; j++) level[f[j]] = lv
			lv++
		}
	}
	{
		# grep -n: file:line:text
		file = $0; sub(/:.*/, "", file)
		rest = substr($0, length(file) + 2)
		ln = rest; sub(/:.*/, "", ln)
		dir = file; sub(/\/[^\/]*$/, "", dir)
		if (rest ~ /^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*</) {
			# <CL/...> or <clblast...>: only the OpenCL-free part is checked
			if (is_nocl(file)) {
				inc = rest; sub(/^[^<]*</, "", inc); sub(/>.*/, "", inc)
				print file ":" ln ": OpenCL include <" inc "> in the OpenCL-free part (clp_base, clp_engine_core)"
				bad = 1
			}
			next
		}
		inc = rest; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
		if (index(inc, "/") == 0) inc = dir "/" inc   # a bare name is in the same folder
		src = unit_of(dir)
		if (src == "") {
			print file ":" ln ": folder " dir " is not in the layer table (tools/check_layers.sh)"
			bad = 1
			next
		}
		dst = unit_of(inc)
		if (dst == "") next   # a generated or system header
		if (is_nocl(file) && !is_nocl(inc)) {
			print file ":" ln ": include of \"" inc "\" in the OpenCL-free part: clp_base and clp_engine_core include only cl/base and each other (engine/CMakeLists.txt CLP_CORE_*)"
			bad = 1
		}
		if (dst == src) next
		if (!((src, dst) in where)) {
			where[src, dst] = file ":" ln
			out[src, ++nout[src]] = dst
			units[src] = 1
		}
		if (level[dst] >= level[src]) {
			kind = (level[dst] == level[src]) ? "sideways" : "upward"
			print file ":" ln ": " kind " include of \"" inc "\": " src " may not include " dst
			bad = 1
		}
	}
	END {
		for (u in units) if (color[u] == 0) dfs(u)
		if (bad) {
			print "layers: FAILED (the table is in tools/check_layers.sh, drawn in docs/DESIGN.md)"
			exit 1
		}
		print "layers: ok (" NR " includes)"
	}'
}

self_test() {
	local here out
	here=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d)  # global: the EXIT trap reads it
	trap 'rm -rf "$tmp"' EXIT
	(cd "$here" && find cl topology engine tools tests -name '*.[ch]' -print0 |
		xargs -0 cp --parents -t "$tmp")
	cp "$here/engine/CMakeLists.txt" "$tmp/engine/"
	check "$tmp" >/dev/null || { echo "self-test: the unmodified copy fails"; check "$tmp"; return 1; }

	# an upward include: the schedule format reaching up into training
	echo '#include "engine/train/session.h"' >>"$tmp/engine/sched/sched.h"
	local line
	line=$(wc -l <"$tmp/engine/sched/sched.h")
	if out=$(check "$tmp"); then
		echo "self-test: an upward include passed"; return 1
	fi
	grep -q "^engine/sched/sched.h:$line: upward include" <<<"$out" ||
		{ echo "self-test: the upward include is not named:"; echo "$out"; return 1; }
	sed -i '$d' "$tmp/engine/sched/sched.h"

	# a cycle between two siblings: skip <-> pass
	echo '#include "engine/pass/validate.h"' >>"$tmp/engine/skip/skip.h"
	echo '#include "engine/skip/skip.h"' >>"$tmp/engine/pass/validate.h"
	if out=$(check "$tmp"); then
		echo "self-test: a folder cycle passed"; return 1
	fi
	grep -q 'folder cycle' <<<"$out" && grep -q 'engine/skip/skip.h:' <<<"$out" ||
		{ echo "self-test: the cycle is not named:"; echo "$out"; return 1; }
	sed -i '$d' "$tmp/engine/skip/skip.h" "$tmp/engine/pass/validate.h"

	# the simulator reaching for an OpenCL header (cl is below engine/sim, so only the
	# OpenCL-free rule catches it), and the same through <CL/cl.h>
	echo '#include "cl/runtime.h"' >>"$tmp/engine/sim/sim.h"
	line=$(wc -l <"$tmp/engine/sim/sim.h")
	if out=$(check "$tmp"); then
		echo "self-test: an OpenCL header in the simulator passed"; return 1
	fi
	grep -q "^engine/sim/sim.h:$line: include of \"cl/runtime.h\" in the OpenCL-free part" <<<"$out" ||
		{ echo "self-test: the OpenCL include is not named:"; echo "$out"; return 1; }
	sed -i '$d' "$tmp/engine/sim/sim.h"
	echo '#include <CL/cl.h>' >>"$tmp/cl/base/status.h"
	line=$(wc -l <"$tmp/cl/base/status.h")
	if out=$(check "$tmp"); then
		echo "self-test: <CL/cl.h> in the base layer passed"; return 1
	fi
	grep -q "^cl/base/status.h:$line: OpenCL include <CL/cl.h>" <<<"$out" ||
		{ echo "self-test: the <CL/cl.h> include is not named:"; echo "$out"; return 1; }
	echo "self-test: ok (an upward include, a folder cycle and an OpenCL header in the OpenCL-free part all fail, with file:line)"
}

case "${1:-}" in
--self-test) self_test ;;
-h | --help) sed -n '2,9p' "$0" ;;
*) check "${1:-$(cd "$(dirname "$0")/.." && pwd)}" ;;
esac
