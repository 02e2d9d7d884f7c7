# Sourced by the scripts in tools/: one engine cache, one PoCL cache and one Mesa cache per checkout, shared by
# every build tree (PoCL compiles each kernel once; CLBlast's first calls take 10-30 s).
root=${root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export CLPIPE_CACHE_DIR=${CLPIPE_CACHE_DIR:-$root/.cache/engine}
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$root/.cache/pocl}
# Mesa (rusticl on llvmpipe) keeps its compiled programs in its disk cache: without it every
# process recompiles every kernel (minutes). The engine cache alone holds only the front end.
export MESA_SHADER_CACHE_DIR=${MESA_SHADER_CACHE_DIR:-$root/.cache/mesa}
# Intel's OpenCL CPU runtime (the .intel tests, tools/setup_intel.sh) keeps no cache of its own
# (no CL_CONFIG_* setting names one); its binaries are complete, so the engine cache holds them.
mkdir -p "$CLPIPE_CACHE_DIR" "$POCL_CACHE_DIR" "$MESA_SHADER_CACHE_DIR"
jobs=$(nproc 2>/dev/null || echo 2)

# configure and build one tree: build_tree DIR [cmake args...]. Warnings are errors
# (-DCLPIPE_WERROR=ON) unless CLPIPE_WERROR=OFF is set, as tools/quickstart.sh does for a new
# user's first build; CMake's own default is OFF.
build_tree() {
  local dir=$1; shift
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLPIPE_WERROR="${CLPIPE_WERROR:-ON}" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
}

# the text files of Debian's fortunes package, one per line (the .dat/.u8 files are indexes
# and symlinks)
fortunes_files() {
  local f
  for f in /usr/share/games/fortunes/*; do
    case "$f" in *.dat|*.u8) ;; *) [ -f "$f" ] && echo "$f" ;; esac
  done
}

# the byte-level corpus of the main job and the benchmarks: every fortunes file, made once
# under .cache/; prints its path
fortunes_corpus() {
  local corpus=$root/.cache/fortunes.txt
  if [ ! -s "$corpus" ]; then
    mkdir -p "$root/.cache"
    fortunes_files | xargs -r -d '\n' cat > "$corpus.tmp" && mv "$corpus.tmp" "$corpus"
  fi
  [ -s "$corpus" ] || { echo "no text under /usr/share/games/fortunes (package fortunes)" >&2; return 1; }
  echo "$corpus"
}
