#!/usr/bin/env bash
# testbins.sh RUN-FLAGS...: make check's `go test ./...`, from test binaries
# kept in $JEJAK_TESTBIN_DIR (default .cache/testbin).
#
# go test links every package's test binary again on every run: about 45 s
# of CPU for the module's forty-odd binaries, a fifth of a make check on
# two cores. `go test -c -o` leaves a binary alone when its build ID says
# it is current, so only the packages a change reaches are linked again.
# The binaries then run as go test would run them (in their package's
# folder, JOBS at a time), the slowest of the last run first so that the
# long ones do not start last. RUN-FLAGS are the binaries' flags
# (-test.parallel, -test.skip, ...).
#
# Output: "ok  <package> <seconds>" per package; a failing package's whole
# output and "FAIL <package>". The exit status is non-zero when any
# package failed or could not be built.
set -euo pipefail

dir=${JEJAK_TESTBIN_DIR:-.cache/testbin}
jobs=${JEJAK_TEST_JOBS:-$(nproc)} # go test's -p default (GOMAXPROCS)
GO=${GO:-go}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd) # the binaries run from their package folders
times="$dir/seconds" # "<package> <seconds>" of the last run
touch "$times"

# Packages with tests, and the binary each is linked to. go test -c -o DIR/
# names a binary after its package's last element, so packages sharing one
# (cmd/web, internal/web) go to different sub-folders: one go invocation
# per sub-folder.
declare -A taken=()
declare -a groups=()
pkgs=()
while read -r pkg pdir; do
	base=${pkg##*/}
	g=0
	while [[ -n ${taken["$g/$base"]:-} ]]; do g=$((g + 1)); done
	taken["$g/$base"]=1
	groups[g]="${groups[g]:-} $pkg"
	pkgs+=("$pkg $pdir $dir/$g/$base.test")
done < <($GO list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./...)

for g in "${!groups[@]}"; do
	mkdir -p "$dir/$g"
	# shellcheck disable=SC2086 # the group is a list of import paths
	$GO test -c -vet=off -trimpath -ldflags=-w -o "$dir/$g/" ${groups[g]}
done

run() { # run PKG DIR BINARY FLAGS...: one package's tests
	local pkg=$1 pdir=$2 bin=$3 out start rc=0
	shift 3
	out=$(mktemp)
	start=$(date +%s%N)
	(cd "$pdir" && "$bin" -test.paniconexit0 "$@") >"$out" 2>&1 || rc=$?
	local ms=$((($(date +%s%N) - start) / 1000000))
	local secs=$((ms / 1000)).$(printf '%03d' $((ms % 1000)))
	if [[ $rc == 0 ]]; then
		printf 'ok  \t%s\t%ss\n' "$pkg" "$secs"
		printf '%s %s\n' "$pkg" "$secs" >>"$TESTBINS_TIMES"
	else
		cat "$out"
		printf 'FAIL\t%s\t%ss\n' "$pkg" "$secs"
	fi
	rm -f "$out"
	return "$rc"
}
export -f run
export TESTBINS_TIMES="$dir/seconds.new"
: >"$TESTBINS_TIMES"

# Slowest first (a package without a time yet counts as slow).
printf '%s\n' "${pkgs[@]}" |
	awk -v times="$times" 'BEGIN { while ((getline l < times) > 0) { split(l, f, " "); t[f[1]] = f[2] } }
		{ print (($1 in t) ? t[$1] : 999), $0 }' |
	sort -rn | cut -d' ' -f2- |
	xargs -P "$jobs" -L1 bash -c 'run "$@" '"$(printf '%q ' "$@")" _ ||
	status=$?
mv "$TESTBINS_TIMES" "$times"
exit "${status:-0}"
