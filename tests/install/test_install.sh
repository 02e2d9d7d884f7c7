#!/usr/bin/env bash
# Issue 31: clpipe installed like a tool. `cmake --install` into a scratch prefix puts the binary,
# docs and man pages where a user looks; `cpack -G DEB` makes a .deb whose Depends name the
# Debian libraries and an OpenCL driver (apt-get install -s resolves them), extracted with
# dpkg-deb -x into a scratch root; each installed binary runs with no build tree and no
# checkout: from an empty directory, and, as root where a mount namespace can be made, with
# tmpfs mounted over the checkout and the build tree so that neither exists for it. It lists
# devices, builds its kernels, trains a tiny model for 4 steps and samples from the checkpoint.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR
set -u
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/clpipe-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

# 1. cmake --install
cmake --install "$build" --prefix "$work/prefix" >"$work/install.out" 2>&1
check "[ $? -eq 0 ]" "cmake --install --prefix $work/prefix ($(tail -1 "$work/install.out"))"
p=$work/prefix
check "[ -x $p/bin/clpipe ]" "bin/clpipe"
check "[ -f $p/share/doc/clpipe/README.md ] && [ -f $p/share/doc/clpipe/PIPELINE.md ] && [ -f $p/share/doc/clpipe/examples/quickstart.toml ] && [ -f $p/share/doc/clpipe/examples/slurm_train.sbatch ]" \
	"share/doc/clpipe: README.md, docs/*.md, examples/ (quickstart.toml, slurm_train.sbatch)"
man=""
if [ -d "$build/man" ]; then
	man=yes
	for m in clpipe clpipe-train clpipe-sample clpipe-devices; do
		check "[ -f $p/share/man/man1/$m.1 ]" "share/man/man1/$m.1"
	done
	check "grep -q '^\\.TH CLPIPE-TRAIN \"1\"' $p/share/man/man1/clpipe-train.1 && grep -q 'resume' $p/share/man/man1/clpipe-train.1" \
		"clpipe-train.1 is a man page made from clpipe train --help"
	if command -v man >/dev/null; then
		check "MANWIDTH=100 man -l $p/share/man/man1/clpipe-sample.1 2>/dev/null | grep -q -- '--prompt'" \
			"man -l renders clpipe-sample.1 with its options"
	fi
else
	echo "skip: man pages (help2man was not installed when the build was configured)"
fi

# 2. the .deb, extracted into a scratch root
roots=("$p")
if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null; then
	(cd "$work" && cpack -G DEB -B "$work/pkg" --config "$build/CPackConfig.cmake") >"$work/cpack.out" 2>&1
	deb=$(ls "$work"/pkg/clpipe_*.deb 2>/dev/null | head -1)
	check "[ -n '$deb' ]" "cpack -G DEB made ${deb##*/} ($(tail -1 "$work/cpack.out"))"
	if [ -n "$deb" ]; then
		dep=$(dpkg-deb -f "$deb" Depends)
		echo "Depends: $dep"
		for d in libclblast libjansson libhwloc libopenmpi 'ocl-icd-libopencl1 | libopencl1' 'pocl-opencl-icd | opencl-icd'; do
			check "[[ \"\$dep\" == *'$d'* ]]" "Depends names $d"
		done
		dpkg-deb -c "$deb" >"$work/deb.list"
		check "grep -q ' ./usr/bin/clpipe$' $work/deb.list && { [ -z '$man' ] || grep -q ' ./usr/share/man/man1/clpipe-train.1' $work/deb.list; } && grep -q ' ./usr/share/doc/clpipe/README.md' $work/deb.list" \
			"the .deb holds /usr/bin/clpipe, the man pages and the docs"
		# apt resolves its Depends against this machine's packages (a simulation: nothing is
		# installed system-wide)
		if command -v apt-get >/dev/null; then
			apt-get install -s "$deb" >"$work/apt.out" 2>&1
			check "grep -q '^Inst clpipe ' $work/apt.out" "apt-get install -s resolves the .deb's Depends ($(grep -c '^Inst ' "$work/apt.out") to install)"
		fi
		dpkg-deb -x "$deb" "$work/root" && roots+=("$work/root/usr")
	fi
else
	echo "skip: the .deb (cpack, dpkg-deb or dpkg-shlibdeps (Debian: dpkg-dev) missing)"
fi

# 3. each installed binary, run from an empty directory with the checkout and build tree hidden
cat >"$work/run.sh" <<'RUN'
set -eu
bin=$1; home=$2
mkdir -p "$home" && cd "$home"
[ -z "$(ls -A)" ]
export CLPIPE_CACHE_DIR=$home/cache
unset CLPIPE_KERNEL_DIR
for i in $(seq 1 400); do echo "the quick brown fox jumps over the lazy dog $((i % 13))."; done >corpus.txt
"$bin" --version
"$bin" devices >devices.out && head -3 devices.out
"$bin" kernels >kernels.out 2>&1 && tail -1 kernels.out
"$bin" train --data corpus.txt --model.n_layer=1 --model.d_model=32 --model.n_head=2 \
	--model.ctx=16 --train.batch=2 --steps 4 --eval.every=0 --ckpt.dir=ck >train.out 2>&1 ||
	{ cat train.out; exit 1; }
grep '^step 4/4' train.out
[ -f ck/step-00000004/manifest.json ]
"$bin" sample --ckpt ck --prompt "the quick" --length 12 --temperature 0 >sample.out
[ "$(wc -c <sample.out)" -gt 9 ] && echo "sample: $(head -c 60 sample.out)"
RUN
hide=""
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	hide=yes
else
	echo "note: not root or no mount namespace: the checkout stays visible (the run is from an empty directory)"
fi
n=0
for r in "${roots[@]}"; do
	n=$((n + 1)); h=$work/home$n
	if [ -n "$hide" ]; then
		# keep the shared kernel caches reachable (they may live under the checkout), then hide
		# the checkout and the build tree behind empty tmpfs mounts
		mkdir -p "$work/pocl$n" "$work/mesa$n"
		unshare -m bash -c '
			set -e
			[ -n "${POCL_CACHE_DIR:-}" ] && mount --bind "$POCL_CACHE_DIR" "$0/pocl$4"
			[ -n "${MESA_SHADER_CACHE_DIR:-}" ] && mount --bind "$MESA_SHADER_CACHE_DIR" "$0/mesa$4"
			export POCL_CACHE_DIR=$0/pocl$4 MESA_SHADER_CACHE_DIR=$0/mesa$4
			mount -t tmpfs none "$1"
			case "$2" in "$1"/*) ;; *) mount -t tmpfs none "$2" ;; esac
			[ -z "$(ls -A "$1")" ] && [ ! -e "$2/CMakeCache.txt" ]
			exec bash "$0/run.sh" "$3/bin/clpipe" "$0/home$4"' "$work" "$src" "$build" "$r" "$n" \
			>"$work/run$n.out" 2>&1
	else
		bash "$work/run.sh" "$r/bin/clpipe" "$h" >"$work/run$n.out" 2>&1
	fi
	rc=$?
	sed 's/^/  | /' "$work/run$n.out"
	check "[ $rc -eq 0 ]" "installed ${r#$work/}/bin/clpipe: devices, kernels, train 4 steps, sample${hide:+ (checkout and build tree hidden)}"
done
exit $fail
