# The Debian package (CPack's DEB generator): `cpack -G DEB` in the build folder writes
# zeroshard_<version>_<arch>.deb with everything `cmake --install` puts under /usr: headers,
# static libraries, the CMake package, zs_train, zs_plan and share/zeroshard/corpus.txt.
# Install it with `apt install ./zeroshard_*.deb`.
#
# The dependencies are the Debian packages a consumer builds and runs against: the libraries are
# static, so the -dev packages of what their usage requirements name (MPI, fmt, nlohmann_json,
# xxHash, Eigen, oneDNN when nn/ uses it, OpenMP's runtime) and the runtime libraries of the two
# programs. A package built with CUDA additionally needs the CUDA toolkit and NCCL it was built
# against (NVIDIA's packages, not Debian's: not listed); configure with -DZS_CUDA=OFF for a
# CPU-only package.
set(CPACK_PACKAGE_NAME zeroshard)
set(CPACK_PACKAGE_VENDOR "zeroshard")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "ZeRO/FSDP-style sharded data-parallel training runtime (MPI, oneDNN/Eigen, CUDA/NCCL)")
set(CPACK_PACKAGE_DESCRIPTION
    "zeroshard splits parameters, gradients, fp32 master weights and optimizer state across the \
ranks of an mpirun job in the three ZeRO stages. This package holds the C++ headers, static \
libraries and CMake package (find_package(zeroshard)), and the zs_train and zs_plan \
programs.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "zeroshard maintainers <zeroshard@example.org>")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # zeroshard_<version>_<arch>.deb
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(ZS_DEB_DEPENDS
    "libopenmpi-dev, openmpi-bin, libfmt-dev, nlohmann-json3-dev, libxxhash-dev, libeigen3-dev"
    "libgomp1, libboost-program-options-dev")
if(ZS_PACKAGE_DNNL)
  list(APPEND ZS_DEB_DEPENDS "libdnnl-dev")
endif()
list(JOIN ZS_DEB_DEPENDS ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "cmake (>= 3.25), g++")
set(CPACK_GENERATOR DEB)
# Only the DEB generator is configured; no source package.
set(CPACK_SOURCE_GENERATOR "")
include(CPack)
