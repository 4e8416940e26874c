#!/usr/bin/env bash
# The installed package as an outside project uses it (ctest install_package, label "install"):
#   install_package_test.sh SOURCE_DIR BUILD_DIR WORKDIR MPIRUN [mpirun flags...]
# 1. `cmake --install BUILD_DIR --prefix WORKDIR/prefix`; the layout holds the headers under
#    include/zeroshard/, the static libraries and lib/cmake/zeroshard/.
# 2. Every installed header compiles on its own terms: one file includes them all as
#    <zeroshard/...>, in a project that only does find_package(zeroshard) and links
#    zeroshard::zeroshard (usage requirements complete: MPI, fmt, json, CUDA/NCCL when built).
# 3. examples/custom_model, configured with -DCMAKE_PREFIX_PATH=WORKDIR/prefix, built, run at 1 and
#    2 ranks at stages 0 and 3: the same param_hash for both stages at each world size, the loss
#    falls, the held-out accuracy is high.
# 4. `cpack -G DEB` into WORKDIR/pkg (not the build folder); `dpkg-deb -c` lists the headers, the
#    CMake package, the libraries and the programs. Skipped (with a note) without dpkg-deb.
set -uo pipefail
src=$1 build=$2 work=$3 mpirun=$4
shift 4
mpi=("$mpirun" "$@")
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
fail() { echo "FAIL: $*"; exit 1; }
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)

# 1. Install.
cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install"; }
for f in include/zeroshard/runtime/engine.h include/zeroshard/unit/unit.h \
         include/zeroshard/checkpoint/checkpoint.h \
         include/zeroshard/collectives/mpi_communicator.h include/zeroshard/core/buffer.h \
         lib/cmake/zeroshard/zeroshardConfig.cmake lib/cmake/zeroshard/zeroshardConfigVersion.cmake \
         lib/cmake/zeroshard/zeroshardTargets.cmake lib/libzs_runtime.a lib/libzs_core.a \
         bin/zs_train bin/zs_run share/zeroshard/corpus.txt; do
  [ -e "$prefix/$f" ] || fail "install: $f missing"
done
[ -z "$(find "$prefix/include" -name '*.cc' -o -name '*_test.h' -o -name 'checkpoint_io.h')" ] ||
  fail "install: sources or internal headers under include/"
# The 0.2 forward headers (old paths such as runtime/unit.h) went in 0.3.
[ ! -e "$prefix/include/zeroshard/runtime/unit.h" ] || fail "install: a 0.2 forward header is installed"
echo "installed: $(find "$prefix/include" -name '*.h' | wc -l) headers, $(ls "$prefix"/lib/*.a | wc -l) libraries"

# 2. Every installed header through the package.
hdr=$work/headers
mkdir -p "$hdr"
(cd "$prefix/include" && find zeroshard -name '*.h' | sort | sed 's|.*|#include <&>|') > "$hdr/all.cc"
cat > "$hdr/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(zeroshard_headers LANGUAGES C CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(zeroshard REQUIRED)
add_library(headers OBJECT all.cc)
target_link_libraries(headers PRIVATE zeroshard::zeroshard)
CMAKE
{ cmake -S "$hdr" -B "$hdr/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$prefix" &&
  cmake --build "$hdr/build"; } > "$hdr/log" 2>&1 || { cat "$hdr/log"; fail "installed headers"; }
echo "headers: $(wc -l < "$hdr/all.cc") installed headers compile through find_package(zeroshard)"

# 3. The outside project, against the prefix only.
cm=$work/custom_model
{ cmake -S "$src/examples/custom_model" -B "$cm" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" && cmake --build "$cm"; } > "$work/custom_model_build.log" 2>&1 ||
  { cat "$work/custom_model_build.log"; fail "building examples/custom_model"; }
for np in 1 2; do
  ref=""
  for stage in 0 3; do
    out=$work/np${np}_s$stage.txt
    OMP_NUM_THREADS=1 "${mpi[@]}" -np "$np" "$cm/custom_model" --stage "$stage" > "$out" 2>&1 ||
      { cat "$out"; fail "custom_model np $np stage $stage exited non-zero"; }
    h=$(grep -oE 'param_hash: [0-9a-f]+' "$out" | awk '{print $2}')
    read -r first last < <(grep -E '^train loss' "$out" | awk '{print $3, $5}')
    acc=$(grep -oE 'accuracy [0-9.]+' "$out" | awk '{print $2}')
    echo "np $np stage $stage: loss $first -> $last, accuracy $acc, param_hash $h"
    [ -n "$h" ] && [ -n "$acc" ] || { cat "$out"; fail "no param_hash or accuracy line"; }
    [ -z "$ref" ] && ref=$h
    [ "$h" = "$ref" ] || fail "np $np: stage $stage param_hash $h differs from stage 0's $ref"
    awk -v a="$first" -v b="$last" -v c="$acc" 'BEGIN { exit !(b < a / 4 && c > 0.9) }' ||
      { cat "$out"; fail "np $np stage $stage did not learn"; }
  done
done

# 4. The Debian package, built away from the build folder's own files.
if ! command -v dpkg-deb > /dev/null; then
  echo "note: dpkg-deb not installed, Debian package not checked"
  exit 0
fi
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg" > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack -G DEB"; }
debs=("$work"/pkg/zeroshard_*_*.deb)
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || { cat "$work/cpack.log"; fail "no zeroshard_<version>_<arch>.deb"; }
dpkg-deb -c "${debs[0]}" > "$work/deb_contents.txt" || fail "dpkg-deb -c"
for f in ./usr/include/zeroshard/runtime/engine.h ./usr/include/zeroshard/unit/unit.h \
         ./usr/lib/cmake/zeroshard/zeroshardConfig.cmake \
         ./usr/lib/cmake/zeroshard/zeroshardTargets.cmake ./usr/lib/libzs_runtime.a \
         ./usr/bin/zs_train ./usr/bin/zs_plan ./usr/bin/zs_run ./usr/share/zeroshard/corpus.txt; do
  grep -q " $f\$" "$work/deb_contents.txt" || { cat "$work/deb_contents.txt"; fail "deb: $f missing"; }
done
echo "$(basename "${debs[0]}"): $(grep -c '\.h$' "$work/deb_contents.txt") headers," \
     "$(grep -c '\.a$' "$work/deb_contents.txt") libraries, $(grep -c 'cmake/zeroshard/' "$work/deb_contents.txt") CMake files"
dpkg-deb -f "${debs[0]}" Package Version Architecture Depends
echo "install package ok"
