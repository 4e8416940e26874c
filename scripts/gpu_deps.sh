#!/usr/bin/env bash
# Downloads (never installs) the Debian bookworm .deb files that building and checking the CUDA
# backend needs on a GPU machine without network access, into .gpu-deps/ (ignored by git). Run it
# HERE, on a Debian bookworm machine with apt and a network; then hand .gpu-deps to the GPU machine
# (device tool: carry [".gpu-deps"]) and run `bash scripts/gpu_check.sh all` there
# (docs/gpu.md, "Checking on a GPU").
#
#   bash scripts/gpu_deps.sh
#
# What it fetches: the headers, CMake configs and libraries CMakeLists.txt asks for (Open MPI,
# Eigen, Boost.Program_options, fmt, nlohmann-json, xxhash, GoogleTest) and the runtime library
# closure of the shared ones (Open MPI's PMIx, hwloc, libevent, UCX, libfabric, verbs, ...). Left
# out: what every glibc-based system with g++ has (libc, libstdc++, libgcc, zlib, libgomp), the
# compilers, docs-only and Fortran pieces, hwloc's GUI/GPU plugins, ssh. oneDNN is optional
# (CMakeLists.txt: find_package(dnnl QUIET)); without it the CPU GEMMs use Eigen, which only the
# CPU reference run of the loss-curve check uses. ZS_GPU_DEPS_DNNL=1 adds it (about +7.5 MiB).
# A few libraries that a base system nearly always has (libudev, libuuid, libatomic) go to
# .gpu-deps/fallback/: gpu_check.sh uses them only where the system lacks the soname.
#
# Environment: ZS_GPU_DEPS_DIR (default .gpu-deps), ZS_APT_UPDATE (1: run apt-get update first,
# the default; 0: use the current package lists), ZS_GPU_DEPS_DNNL (0|1).
set -euo pipefail
cd "$(dirname "$0")/.."

dest=${ZS_GPU_DEPS_DIR:-.gpu-deps}

# What the build reads: headers, CMake package configs, link-time .so symlinks, static gtest.
build_pkgs=(libopenmpi-dev openmpi-common libeigen3-dev libboost1.74-dev
            libboost-program-options1.74-dev libgtest-dev libfmt-dev nlohmann-json3-dev
            libxxhash-dev)
# Shared libraries and programs needed at run time; their Depends closure is computed below.
runtime_roots=(libopenmpi3 openmpi-bin libfmt9 libboost-program-options1.74.0 libxxhash0)
if [ "${ZS_GPU_DEPS_DNNL:-0}" = 1 ]; then
  # libdnnl-dev's CMake config requires OpenCL (run.sh's note); the ICD loader is its runtime.
  build_pkgs+=(libdnnl-dev ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers)
  runtime_roots+=(libdnnl2)
fi

# Packages of the closure that are not fetched: the base system (glibc, the GCC runtime, zlib and
# what dpkg/apt/login/ssh pull in), X11 and the hwloc plugins that want it, ssh (mpirun on one node
# does not use it).
skip_pkgs=(adduser cdebconf debconf dpkg install-info passwd tar readline-common openssh-client
           libc6 libgcc-s1 libstdc++6 gcc-12-base zlib1g libgomp1 libcrypt1 libselinux1 libpcre2-8-0
           libacl1 libattr1 libaudit1 libaudit-common libcap-ng0 libcap2 libbsd0 libmd0 libbz2-1.0
           liblzma5 libzstd1 liblz4-1 libssl3 libdb5.3 libtinfo6 libreadline8 libedit2 libpam0g
           libpam-modules libpam-modules-bin libsemanage2 libsemanage-common libsepol2 libslang2
           libnewt0.52 libtextwrap1 libdebian-installer4 libgssapi-krb5-2 libkrb5-3 libk5crypto3
           libkrb5support0 libkeyutils1 libcom-err2 libfido2-1 libcbor0.8 libicu72 libxml2
           libhwloc-plugins libxnvctrl0 libx11-6 libx11-data libxau6 libxcb1 libxdmcp6 libxext6
           libpciaccess0 ocl-icd-libopencl1)
# Runtime libraries taken, but used on the GPU machine only where its system lacks them.
fallback_pkgs=(libudev1 libuuid1 libatomic1)
if [ "${ZS_GPU_DEPS_DNNL:-0}" = 1 ]; then
  # The OpenCL ICD loader is then needed (libdnnl.so links it, its CMake config finds it).
  skip_pkgs=("${skip_pkgs[@]/ocl-icd-libopencl1/}")
fi

# shellcheck disable=SC1091
if [ "$(. /etc/os-release && echo "${ID}-${VERSION_ID:-}")" != debian-12 ]; then
  echo "gpu_deps.sh: expected Debian 12 (bookworm); the .deb files must match what" \
    "gpu_check.sh expects (Open MPI 4.1, Boost 1.74)" >&2
  exit 1
fi
command -v apt-get >/dev/null || { echo "gpu_deps.sh: apt-get not found" >&2; exit 1; }

if [ "${ZS_APT_UPDATE:-1}" = 1 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "== apt-get update"
  $sudo apt-get update -qq
fi

in_list() {  # in_list WORD LIST...
  local w=$1; shift
  local x
  for x in "$@"; do [ "$x" = "$w" ] && return 0; done
  return 1
}

# The Depends/PreDepends closure of the runtime roots (real packages only: apt-cache prints
# virtual ones as <name> and indents the edges).
mapfile -t closure < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances "${runtime_roots[@]}" | grep -v '^[ <]' | sort -u)

main=()
fallback=()
for p in "${build_pkgs[@]}" "${closure[@]}"; do
  if in_list "$p" "${fallback_pkgs[@]}"; then
    in_list "$p" "${fallback[@]}" || fallback+=("$p")
  elif ! in_list "$p" "${skip_pkgs[@]}" && ! in_list "$p" "${main[@]}"; then
    main+=("$p")
  fi
done

rm -rf "$dest"
mkdir -p "$dest/fallback"
echo "== downloading ${#main[@]} packages (+ ${#fallback[@]} fallback) into $dest"
# As root, apt's _apt sandbox user cannot write into the checkout; download as root then.
apt_opts=(-q)
[ "$(id -u)" -eq 0 ] && apt_opts+=(-o APT::Sandbox::User=root)
(cd "$dest" && apt-get "${apt_opts[@]}" download "${main[@]}" >/dev/null)
(cd "$dest/fallback" && apt-get "${apt_opts[@]}" download "${fallback[@]}" >/dev/null)

# Check the closure: every shared library an ELF file in the set needs must come from the set or be
# one that gpu_check.sh expects of the system (glibc, libstdc++/libgcc_s, zlib, libgomp).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in "$dest"/*.deb "$dest"/fallback/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
# The one library link Debian makes with update-alternatives (gpu_check.sh makes it too).
ln -s ../libpsm1/libpsm_infinipath.so.1.16 "$tmp/root/usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1"
printf '%s\n' ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 \
  libstdc++.so.6 libgcc_s.so.1 libz.so.1 libgomp.so.1 >"$tmp/base"
# Sonames the set provides (file names of shared objects and their links).
find "$tmp/root" \( -type f -o -type l \) -name 'lib*.so*' -printf '%f\n' | sort -u >"$tmp/provided"
missing=$(find "$tmp/root" -type f \( -name '*.so*' -o -perm -u+x \) -print0 |
  { xargs -0 -r readelf -d 2>/dev/null || true; } | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u |
  while read -r so; do
    grep -qxF "$so" "$tmp/provided" "$tmp/base" || echo "$so"
  done)
if [ -n "$missing" ]; then
  echo "gpu_deps.sh: shared libraries needed but neither fetched nor expected of the system:" >&2
  while read -r so; do echo "  $so" >&2; done <<<"$missing"
  exit 1
fi

# shellcheck disable=SC1091
{
  echo "# .gpu-deps: fetched by scripts/gpu_deps.sh on $(date -u +%Y-%m-%dT%H:%MZ)" \
    "($(. /etc/os-release && echo "$PRETTY_NAME"), dnnl=${ZS_GPU_DEPS_DNNL:-0})"
  for d in "$dest"/*.deb "$dest"/fallback/*.deb; do
    printf '%s %s %s\n' "$(dpkg-deb -f "$d" Package)" "$(dpkg-deb -f "$d" Version)" \
      "${d#"$dest"/}"
  done
} >"$dest/MANIFEST.txt"

n=$(find "$dest" -name '*.deb' | wc -l)
echo "== $n .deb files in $dest ($(du -sh --apparent-size "$dest" | cut -f1) total," \
  "$(du -sb "$dest" | cut -f1) bytes); list in $dest/MANIFEST.txt"
