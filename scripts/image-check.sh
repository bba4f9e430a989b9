#!/usr/bin/env bash
# What the container image builds, checked without a container engine, then the image
# itself where Debian's buildah can build it.
#
#  1. The build stage's files: the paths the Dockerfile's build stage COPYs, from the
#     tracked files (a clean clone's build context), into a fresh directory. There the
#     stage's build, scripts/release-build.sh, runs under GCC and then clang, each into
#     a fresh build directory, and each binary prints its version. The stage must build
#     by that script alone, so that its flags are the ones checked here.
#  2. The extender image, the Dockerfile's default target, built by buildah (no daemon;
#     vfs storage and chroot isolation in a temporary directory). The Dockerfile's BASE
#     comes from a registry that a CI machine may not reach, so BASE is a minbase
#     root filesystem of the same Debian release, made by mmdebstrap from Debian's
#     archive and cached in ~/.cache/flextopo-image for a week. The image's entrypoint
#     then runs once, as the image's user and with the image's configuration, on the
#     demo cluster: /readyz must answer ok, and /filter must place the demo pod.
#  3. The scheduler image (target scheduler), built by buildah the same way. Its build
#     stage starts from a Go image (GO_BASE) that CI cannot pull either, so GO_BASE is
#     the minbase root filesystem with this machine's Go toolchain (go env GOROOT), and
#     go mod download reads the machine's module cache as its GOPROXY (file://, each
#     module checked against go.sum). The stage's go build uses the machine's Go build
#     cache (mounted as its GOCACHE, as a BuildKit cache mount would be): the cache is
#     keyed by every input of each package, so what changed is compiled again, and
#     kube-scheduler's packages, which scripts/build-scheduler.sh has compiled with the
#     same toolchain and flags, are not. The image's entrypoint then prints its version,
#     as the image's user.
#
#   scripts/image-check.sh                       all three
#   IMAGE_CHECK=build scripts/image-check.sh     only 1
#   IMAGE_CHECK=extender scripts/image-check.sh  1 and 2
#   IMAGE_CHECK=base scripts/image-check.sh      only the cached root filesystem of 2
#                                                (scripts/prepare.sh)
#
# Without buildah or mmdebstrap (scripts/install-deps.sh installs both) steps 2 and 3
# are skipped with a message, and without go step 3; under CI=true that is a failure.
# Steps 2 and 3 run as root.
# CMAKE_BUILD_PARALLEL_LEVEL limits the build jobs of both steps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
work=$(mktemp -d)
store=$work/storage
buildah_cmd=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
server_pid=""

cleanup() {
	if [[ -n $server_pid ]]; then
		kill -TERM -- "-$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [[ -d $store ]]; then
		"${buildah_cmd[@]}" rm --all >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "image-check: $*" >&2
	exit 1
}

# The instructions of Dockerfile stage $1, one a line, continuations joined and
# comments left out.
stage_lines() {
	awk -v stage="$1" '
		/^[[:space:]]*#/ { next }
		{ line = line $0 }
		/\\$/ { sub(/\\$/, "", line); next }
		{
			if (line ~ /^FROM[[:space:]]/)
				on = line ~ ("[[:space:]][Aa][Ss][[:space:]]+" stage "[[:space:]]*$")
			else if (on && line ~ /[^[:space:]]/)
				print line
			line = ""
		}' Dockerfile
}

# The build context: the tracked files, as a clean clone has them.
context=$work/context
mkdir -p "$context"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$context"

# COPY SRC... DEST of the build stage, into $stage (its WORKDIR).
stage_copy() {
	local dest=${*: -1} src
	for src in "${@:1:$#-1}"; do
		[[ -e $context/$src ]] || fail "the build stage copies $src, which is not tracked"
		if [[ -d $context/$src ]]; then
			mkdir -p "$stage/$dest"
			cp -a "$context/$src/." "$stage/$dest/"
		elif [[ $dest == */ || $dest == . ]]; then
			mkdir -p "$stage/$dest"
			cp -a "$context/$src" "$stage/$dest"
		else
			mkdir -p "$(dirname "$stage/$dest")"
			cp -a "$context/$src" "$stage/$dest"
		fi
	done
}

# Debian release of the Dockerfile's BASE (debian:<release>-slim), and the minbase
# root filesystem of that release that stands for it, cached for a week.
release=$(sed -n 's/^ARG BASE=debian:\([a-z]*\)-slim$/\1/p' Dockerfile)
[[ -n $release ]] || fail "the Dockerfile's BASE is not debian:<release>-slim"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/flextopo-image
base=$cache/$release-minbase.tar

# Fails (CI) or returns 1 (elsewhere) when buildah or mmdebstrap is missing.
image_tools() {
	local tool
	for tool in buildah mmdebstrap; do
		if ! command -v "$tool" >/dev/null 2>&1; then
			[[ ${CI:-} != true ]] || fail "$tool is missing (scripts/install-deps.sh installs it)"
			echo "image-check: $tool is missing; the image itself is not built"
			return 1
		fi
	done
	[[ $(id -u) -eq 0 ]] || fail "building the image needs root (chroot isolation)"
}

make_base() {
	mkdir -p "$cache"
	if [[ ! -f $base || -n $(find "$base" -maxdepth 0 -mtime +7) ]]; then
		echo "image-check: making a $release minbase root filesystem"
		mmdebstrap --quiet --variant=minbase --format=tar "$release" "$base.tmp" \
			"deb http://deb.debian.org/debian $release main" \
			"deb http://deb.debian.org/debian $release-updates main" \
			"deb http://deb.debian.org/debian-security $release-security main"
		mv "$base.tmp" "$base"
	fi
}

if [[ ${IMAGE_CHECK:-all} == base ]]; then
	image_tools || exit 0
	make_base
	echo "image-check: $base ready"
	exit 0
fi

echo "== the build stage's files, built by its script under GCC and clang"
lines=$(stage_lines build)
grep -qx 'RUN scripts/release-build.sh /build' <<<"$lines" ||
	fail "the build stage does not run 'scripts/release-build.sh /build'"
if grep -E '^RUN' <<<"$lines" | grep -v 'apt-get' | grep -vqx 'RUN scripts/release-build.sh /build'; then
	fail "the build stage builds by more than scripts/release-build.sh: $(grep -E '^RUN' <<<"$lines")"
fi
stage=$work/src
mkdir -p "$stage"
while read -r -a words; do
	paths=()
	for w in "${words[@]:1}"; do
		[[ $w == --* ]] || paths+=("$w") # --chown and the like change no content
	done
	stage_copy "${paths[@]}"
done < <(grep -E '^COPY[[:space:]]' <<<"$lines" | grep -v -- '--from=')
for cc in gcc clang; do
	start=$SECONDS
	CC=$cc "$stage/scripts/release-build.sh" "$work/build-$cc" >"$work/build-$cc.log" 2>&1 ||
		{ cat "$work/build-$cc.log" >&2; fail "the image's build fails under $cc"; }
	echo "image-check: $cc: $("$work/build-$cc/flextopo-extender" --version)," \
		"flextopo-discover built, $((SECONDS - start)) s"
done

if [[ ${IMAGE_CHECK:-all} == build ]]; then
	exit 0
fi
echo "== the extender image, built by buildah, and its entrypoint run once"
image_tools || exit 0

make_base
start=$SECONDS
container=$("${buildah_cmd[@]}" from scratch)
"${buildah_cmd[@]}" add "$container" "$base" / >/dev/null
"${buildah_cmd[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	"$container"
"${buildah_cmd[@]}" commit --quiet "$container" localhost/flextopo-base:"$release" >/dev/null
image=localhost/flextopo-extender:check
"${buildah_cmd[@]}" bud --isolation chroot --layers=false --pull=never \
	--build-arg BASE=localhost/flextopo-base:"$release" -t "$image" "$context" \
	>"$work/bud.log" 2>&1 || { tail -n 40 "$work/bud.log" >&2; fail "the image does not build"; }
echo "image-check: $image built in $((SECONDS - start)) s"

# The entrypoint with the image's user and configuration, on the demo cluster.
container=$("${buildah_cmd[@]}" from "$image")
"${buildah_cmd[@]}" copy "$container" configs/demo-cluster.yaml /tmp/demo-cluster.yaml >/dev/null
user=$("${buildah_cmd[@]}" inspect --format '{{.OCIv1.Config.User}}' "$image")
entrypoint=$("${buildah_cmd[@]}" inspect --format '{{index .OCIv1.Config.Entrypoint 0}}' "$image")
config=$("${buildah_cmd[@]}" inspect --format '{{index .OCIv1.Config.Cmd 1}}' "$image")
# Port 0: the extender binds a free port and logs it, so no other process
# can take a port chosen here before the extender binds it.
setsid "${buildah_cmd[@]}" run --isolation chroot --user "$user" "$container" -- \
	"$entrypoint" --config "$config" --snapshot /tmp/demo-cluster.yaml \
	--listen 127.0.0.1:0 >"$work/run.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 600); do
	port=$(sed -n 's/.*serving the extender API on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p' "$work/run.log")
	[[ -z $port ]] || break
	kill -0 "$server_pid" 2>/dev/null || break
	sleep 0.1
done
[[ -n $port ]] || { cat "$work/run.log" >&2; fail "the image's extender did not start listening"; }
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
	sleep 0.1
done
ready=$(curl -sf "http://127.0.0.1:$port/readyz") || { cat "$work/run.log" >&2; fail "/readyz does not answer"; }
reply=$(curl -sf -H 'Content-Type: application/json' -d @configs/demo-filter.json \
	"http://127.0.0.1:$port/filter")
grep -q '"NodeNames":\["demo-a100-0","demo-h100-0"\]' <<<"$reply" ||
	fail "the image's extender did not place the demo pod: $reply"
echo "image-check: $entrypoint as user $user, --config $config: /readyz $ready," \
	"/filter placed the demo pod on demo-a100-0 or demo-h100-0"

if [[ ${IMAGE_CHECK:-all} == extender ]]; then
	exit 0
fi
echo "== the scheduler image, built by buildah on this machine's Go toolchain, and run once"
if ! command -v go >/dev/null 2>&1; then
	[[ ${CI:-} != true ]] || fail "go is missing (scripts/install-deps.sh installs it)"
	echo "image-check: go is missing; the scheduler image is not built"
	exit 0
fi
goroot=$(go env GOROOT)
modcache=$(go env GOMODCACHE)
gocache=$(go env GOCACHE)
# The build stage's modules, into the module cache its GOPROXY reads.
(cd scheduler && go mod download)
start=$SECONDS
container=$("${buildah_cmd[@]}" from localhost/flextopo-base:"$release")
"${buildah_cmd[@]}" copy "$container" "$goroot" /usr/local/go >/dev/null
"${buildah_cmd[@]}" config --env GOTOOLCHAIN=local --env GOCACHE=/gocache \
	--env PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	"$container"
"${buildah_cmd[@]}" commit --quiet "$container" localhost/flextopo-go:check >/dev/null
image=localhost/flextopo-scheduler:check
"${buildah_cmd[@]}" bud --isolation chroot --layers=false --pull=never --target scheduler \
	--build-arg BASE=localhost/flextopo-base:"$release" --build-arg GO_BASE=localhost/flextopo-go:check \
	--build-arg GOPROXY=file:///gomodcache --volume "$modcache/cache/download:/gomodcache:ro" \
	--volume "$gocache:/gocache" \
	-t "$image" "$context" >"$work/bud-scheduler.log" 2>&1 ||
	{ tail -n 40 "$work/bud-scheduler.log" >&2; fail "the scheduler image does not build"; }
echo "image-check: $image built in $((SECONDS - start)) s"
container=$("${buildah_cmd[@]}" from "$image")
user=$("${buildah_cmd[@]}" inspect --format '{{.OCIv1.Config.User}}' "$image")
entrypoint=$("${buildah_cmd[@]}" inspect --format '{{index .OCIv1.Config.Entrypoint 0}}' "$image")
version=$("${buildah_cmd[@]}" run --isolation chroot --user "$user" "$container" -- "$entrypoint" --version) ||
	fail "the scheduler image's $entrypoint does not run"
grep -q '^Kubernetes v1\.36\.' <<<"$version" || fail "the scheduler image's $entrypoint --version: $version"
echo "image-check: $entrypoint as user $user: $version"
