#!/usr/bin/env bash
# Builds gpumem's release files into dist/: for each platform a static
# binary packed as .tar.gz (.zip for Windows) with README.md and LICENSE,
# a Python wheel carrying it (pip install puts gpumem on PATH), and
# SHA256SUMS over all of them.
#
#   scripts/release.sh 0.1.0
#
# Reproducible: the same commit and Go toolchain give byte-identical files
# on any machine and in any folder. The build date and every mtime are the
# commit's time (or $SOURCE_DATE_EPOCH when set), never the clock. Needs no
# network beyond the Go module proxy (for modules not yet in the cache).
set -euo pipefail

if [[ $# -ne 1 || $1 == -* ]]; then
  echo "usage: scripts/release.sh VERSION   (e.g. 0.1.0; writes dist/)" >&2
  exit 2
fi
version=${1#v} # tags are often v0.1.0; the wheel and "gpumem version" use 0.1.0
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if git rev-parse --git-dir >/dev/null 2>&1; then
  commit=$(git rev-parse HEAD)
  # Untracked files don't count (dist/ is ignored); changes to tracked ones do.
  if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
    echo "release: warning: the work tree has uncommitted changes; recording $commit+dirty" >&2
    commit="$commit+dirty"
  fi
  epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}
else
  commit=${GPUMEM_COMMIT:-unknown}
  epoch=${SOURCE_DATE_EPOCH:?not a git checkout: set SOURCE_DATE_EPOCH (and GPUMEM_COMMIT)}
fi

tool=$(mktemp -d)
trap 'rm -rf "$tool"' EXIT
go build -o "$tool/release" ./scripts/release # not "go run": its "exit status 1" would follow our one-line errors
rm -rf dist
"$tool/release" -version "$version" -commit "$commit" -date "$epoch" -dist dist

# Check every wheel the way an installer would, where Python is at hand.
if command -v python3 >/dev/null 2>&1; then
  for whl in dist/*.whl; do
    # zipfile -t exits 0 even on a bad CRC: read what it says.
    [[ $(python3 -m zipfile -t "$whl") == "Done testing" ]] || { echo "release: $whl fails zipfile -t" >&2; exit 1; }
    python3 scripts/check_wheel.py "$whl"
  done
fi
(cd dist && cat SHA256SUMS)
