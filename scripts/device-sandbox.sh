#!/usr/bin/env bash
# Runs a command on THIS machine as if the Debian packages that .device/deps.tar.xz carries were
# not installed, to test the device build here before a device call:
#   bash scripts/device-sandbox.sh [--runtime] -- COMMAND...
# In a private mount namespace, /usr is overlaid with whiteouts for every file those packages
# installed (the -dev packages and Boost's; with --runtime also the runtime libraries, which
# CMake itself may need, so use it only for running built programs). Nothing outside the
# namespace changes. Needs root, unshare and overlayfs; reads the package list from
# .device/manifest.txt (scripts/device-prepare.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "device-sandbox: error: $*" >&2; exit 1; }
runtime=0
while [ $# -gt 0 ]; do
  case $1 in
    --runtime) runtime=1; shift ;;
    --) shift; break ;;
    *) die "usage: device-sandbox.sh [--runtime] -- COMMAND..." ;;
  esac
done
[ $# -gt 0 ] || die "no command given"
[ "$(id -u)" = 0 ] || die "needs root (a mount namespace and an overlay over /usr)"
[ -f .device/manifest.txt ] || die "no .device/manifest.txt (run scripts/device-prepare.sh)"

packages=$(sed -n 's/^packages=//p' .device/manifest.txt | tr ',' '\n' | awk '{print $1}')
boost=$(sed -n 's/^boost=\([^ ]*\).*/\1/p' .device/manifest.txt)
hide=()
for p in $packages $boost; do
  case $p in
    *-dev|pkgconf|pkgconf-bin) hide+=("$p") ;;
    *) [ $runtime = 1 ] && hide+=("$p") ;;
  esac
done

work=$(mktemp -d /tmp/psi-sandbox.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/upper" "$work/work"
# One whiteout (a 0/0 character device) per file, made in one python3 process: a shell loop
# forks several times per file and there are tens of thousands.
installed=()
for p in "${hide[@]}"; do dpkg -s "$p" >/dev/null 2>&1 && installed+=("$p"); done  # others: nothing to hide
[ ${#installed[@]} -gt 0 ] || die "none of the carried packages is installed here: nothing to hide"
dpkg -L "${installed[@]}" | python3 -c '
import os, stat, sys
upper, count = sys.argv[1], 0
for line in sys.stdin:
    f = line.rstrip("\n")
    if f.startswith("/usr/"):
        rel = f[5:]
    elif f.split("/")[1:2] and f.split("/")[1] in ("lib", "lib64", "bin", "sbin"):
        rel = f[1:]  # merged /usr: /lib is /usr/lib
    else:
        continue
    target = "/usr/" + rel
    if os.path.isdir(target) and not os.path.islink(target):
        continue
    if not os.path.lexists(target):
        continue
    w = os.path.join(upper, rel)
    if os.path.lexists(w):
        continue
    os.makedirs(os.path.dirname(w), exist_ok=True)
    os.mknod(w, 0o600 | stat.S_IFCHR, os.makedev(0, 0))
    count += 1
open(sys.argv[2], "w").write(str(count))
' "$work/upper" "$work/count"
count=$(cat "$work/count")
echo "device-sandbox: hiding $count files of ${#installed[@]} packages"
unshare -m --propagation private bash -c '
  mount -t overlay overlay -o "lowerdir=/usr,upperdir=$1,workdir=$2" /usr || { echo "device-sandbox: error: overlay mount failed" >&2; exit 1; }
  shift 2
  exec "$@"' sandbox "$work/upper" "$work/work" "$@"
