# Debian 12 packages Primus needs to build, test and run its Slurm testbed (sourced by
# scripts/test and scripts/quickstart).
PRIMUS_BUILD_PACKAGES=(
  g++ make autoconf automake libtool pkg-config git
  libslurm-dev libpmix-dev libhdf5-dev hdf5-tools libboost-program-options-dev libisal-dev
  libssl-dev nlohmann-json3-dev libgtest-dev libcpp-httplib-dev
  python3 python3-dev python3-numpy python3-pybind11 pybind11-dev
)
PRIMUS_TEST_PACKAGES=(
  slurmctld slurmd slurm-client munge openmpi-bin lmod gdb
  python3-pytest python3-h5py python3-torch procps iproute2 strace
  python3-matplotlib prometheus tmux
)
# --full: the fuzzer, and the baselines of the collectives benchmark (Open MPI's MPI_Allreduce,
# Gloo).
PRIMUS_FULL_PACKAGES=(clang libclang-rt-14-dev libopenmpi-dev libgloo-dev)

# Installs what is missing (as root, with apt-get); says what it needs otherwise.
primus_install_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ -n ${PRIMUS_NO_APT:-} || $(id -u) -ne 0 ]]; then
    echo "missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
    return 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
