# Sourced by the scripts that build or test Go code linked against the C
# core through cgo (build-scheduler.sh, test.sh).
#
#   cgo_core_env BUILD_DIR   exports CGO_ENABLED=1, CGO_CFLAGS (-I include,
#                            the libraries' digest, then what CGO_CFLAGS
#                            held) and CGO_LDFLAGS (-L BUILD_DIR, then what
#                            it held), for BUILD_DIR's libft_*.a.
#
# go's build cache does not look into the static libraries that cgo links:
# their digest, compiled into the core package as a string
# (scheduler/internal/core/core.go), makes a changed core relink the binary
# or test. A flag alone did not: go relinks only when a package's compiled
# output changes, and kept an older binary at the same path.
#
# Needs repo_root set by the caller.

cgo_core_env() {
	local build_dir=$1 digest
	digest=$(cat "$build_dir"/libft_*.a | sha256sum | cut -c1-16)
	export CGO_ENABLED=1
	export CGO_CFLAGS="-I$repo_root/include -DFT_CORE_LIBS_DIGEST=$digest ${CGO_CFLAGS:-}"
	export CGO_LDFLAGS="-L$build_dir ${CGO_LDFLAGS:-}"
}
