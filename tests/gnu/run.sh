#!/usr/bin/env bash
# GNU coreutils' own tests/cp suite, run against GNU cp (the baseline) and against ringio in
# cp's place, as root and as an unprivileged user. See --help and docs/CONFORMANCE.md.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: tests/gnu/run.sh [OPTION]...

Run GNU coreutils' tests/cp/*.sh with GNU cp and with ringio as cp, and print a table.

Fetches Debian's source package of the installed coreutils (apt-get source), builds it once
into the cache directory, then runs each test four times: GNU cp as root, ringio as root,
GNU cp as a non-root user, ringio as a non-root user. Must run as root (it installs the
build dependencies, may add a deb-src entry and may create the non-root user).

Options:
  --ringio PATH    the ringio binary to test (default: build this repository's release
                   binary with cargo and use target/release/ringio)
  --cache DIR      where the source, the build and the logs live
                   (default: ${XDG_CACHE_HOME:-$HOME/.cache}/ringio-gnu)
  --user NAME      the unprivileged user for the non-root passes and for the tests'
                   NON_ROOT_USERNAME (default: ringio-gnu, created with useradd if absent,
                   in two groups since existing-perm-race needs that)
  --timeout SEC    per-test time limit; a test still running then is a HANG (default: 120)
  --tests GLOB     run only the tests whose name matches GLOB, e.g. 'sparse*' (default: *)
  --passes LIST    comma-separated subset of gnu-root,ringio-root,gnu-user,ringio-user
                   (default: all four)
  --expensive      also run the tests that the suite marks expensive (link-heap, perm),
                   as RUN_EXPENSIVE_TESTS=yes does; `make check` skips them by default
  --strict         gate, do not only report: exit 1 when a test of any pass FAILs or
                   HANGs, or SKIPs without being listed, for its reason, in
                   tests/gnu/expected-skips; each such test is named with its log.
                   The default when the environment sets CI (non-empty), as .ci/run does
  --no-strict      report only, even with CI set: exit 0 whatever the tests did
  -h, --help       show this help

Exit status: 0; 1 when the source cannot be fetched or built, the environment cannot be set
up, or (strict) a test failed the gate; 2 for a bad argument.

The tests run in a fresh copy of the build, ${TMPDIR:-/tmp}/ringio-gnu-run.XXXXXX, which the
non-root user can reach; it is removed at the end.

ringio is linked into the build's src/ as `cp` (a symlink: ringio acts as cp when run under
that name). If the binary does not answer `cp --version` as ringio, a two-line wrapper script
that runs `ringio cp "$@"` is used instead, and the output says so.

Logs, with the shell trace of each test: <cache>/logs/<UTC time>/<pass>/<test>.log, and the
table in <cache>/logs/<UTC time>/table.txt; <cache>/logs/latest is the newest run.
EOF
}

repo=$(cd "$(dirname "$0")/../.." && pwd)
ringio=""
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ringio-gnu"
user='ringio-gnu'
timeout_s=120
tests_glob='*'
passes=gnu-root,ringio-root,gnu-user,ringio-user
expensive=no
strict=no
[ -n "${CI:-}" ] && strict=yes
expected_skips=$(dirname "$0")/expected-skips

while [ $# -gt 0 ]; do
    case "$1" in
        --ringio) ringio=$2; shift 2 ;;
        --ringio=*) ringio=${1#*=}; shift ;;
        --cache) cache=$2; shift 2 ;;
        --cache=*) cache=${1#*=}; shift ;;
        --user) user=$2; shift 2 ;;
        --user=*) user=${1#*=}; shift ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --timeout=*) timeout_s=${1#*=}; shift ;;
        --tests) tests_glob=$2; shift 2 ;;
        --tests=*) tests_glob=${1#*=}; shift ;;
        --passes) passes=$2; shift 2 ;;
        --passes=*) passes=${1#*=}; shift ;;
        --expensive) expensive=yes; shift ;;
        --strict) strict=yes; shift ;;
        --no-strict) strict=no; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

say() { echo "== $*" >&2; }
die() { echo "run.sh: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get source, build dependencies, the non-root user)"
case "$timeout_s" in '' | *[!0-9]*) die "--timeout '$timeout_s': not a number of seconds" ;; esac
for p in ${passes//,/ }; do
    case "$p" in gnu-root | ringio-root | gnu-user | ringio-user) ;;
        *) die "--passes: unknown pass '$p' (gnu-root, ringio-root, gnu-user, ringio-user)" ;;
    esac
done

# ---- the expected skips (strict mode) ---------------------------------------------------------
# tests/gnu/expected-skips: `root|user TEST REASON...` a line, # comments. A SKIP passes the
# gate only if it is listed for its privilege and its log says `skipped test: REASON`.
declare -A expected
if [ "$strict" = yes ]; then
    [ -f "$expected_skips" ] || die "strict: no list of expected skips at $expected_skips"
    lineno=0
    while IFS= read -r line || [ -n "$line" ]; do
        lineno=$((lineno + 1))
        line=${line%%#*}
        read -r who name reason <<<"$line" || true
        [ -n "${who:-}" ] || continue
        case "$who" in root | user) ;; *) die "$expected_skips:$lineno: '$who': not root or user" ;; esac
        [ -n "${reason:-}" ] || die "$expected_skips:$lineno: $name: no reason"
        expected[$who/$name]=$reason
    done <"$expected_skips"
fi

# ---- the ringio binary ----------------------------------------------------------------------
if [ -z "$ringio" ]; then
    say "cargo build --release -p ringio"
    (cd "$repo" && cargo build --release -p ringio --quiet)
    ringio=$repo/target/release/ringio
fi
[ -x "$ringio" ] || die "--ringio '$ringio': not an executable file"
ringio=$(realpath "$ringio")

# ---- Debian's source package of the installed coreutils ---------------------------------------
version=$(dpkg-query -W -f='${Version}' coreutils) || die "coreutils is not installed (dpkg-query)"
upstream=${version#*:}
upstream=${upstream%-*}
mkdir -p "$cache"
cache=$(realpath "$cache")
# One run at a time per cache: the build and the logs are shared.
exec 9>"$cache/.lock"
if ! flock -n 9; then
    say "another run is using $cache: waiting for it (at most 30 minutes)"
    flock -w 1800 9 || die "another run is still using $cache after 30 minutes"
fi
src=$cache/coreutils-$upstream

apt_updated=""
apt_update() { [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }; }

# A deb-src entry for the suite and mirror that the deb entries use, unless one is there.
ensure_deb_src() {
    local files
    files=$(ls /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    # shellcheck disable=SC2086
    if [ -n "$files" ] && grep -qsE '^(deb-src|Types:.*deb-src)' $files; then
        return
    fi
    local uri suite
    # shellcheck disable=SC2086
    uri=$(grep -hE '^URIs:' $files 2>/dev/null | head -n1 | awk '{print $2}')
    # shellcheck disable=SC2086
    suite=$(grep -hE '^Suites:' $files 2>/dev/null | head -n1 | awk '{print $2}')
    if [ -z "$uri" ]; then
        # shellcheck disable=SC2086
        read -r _ uri suite _ < <(grep -hE '^deb ' $files | grep -v '\[' | head -n1)
    fi
    if [ -z "$uri" ] || [ -z "$suite" ]; then
        die "no deb entry in /etc/apt/sources.list* to derive a deb-src entry from"
    fi
    say "adding a deb-src entry: $uri $suite main (/etc/apt/sources.list.d/ringio-gnu-src.sources)"
    printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$uri" "$suite" >/etc/apt/sources.list.d/ringio-gnu-src.sources
    apt_updated=""
}

ensure_packages() {
    local missing=() pkg
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    [ ${#missing[@]} -eq 0 ] && return
    say "apt-get install ${missing[*]}"
    apt_update
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

if [ ! -f "$src/configure" ]; then
    ensure_deb_src
    # dpkg-dev unpacks the source package; the acl and attr libraries so that the built cp,
    # like Debian's, handles ACLs and xattrs, and their tools (getfacl, setfattr...) because
    # the tests of those use them; perl runs some of the tests.
    ensure_packages dpkg-dev gcc make perl libacl1-dev libattr1-dev libcap-dev acl attr
    apt_update || die "apt-get update failed (see above)"
    say "apt-get source coreutils=$version into $cache"
    (cd "$cache" && apt-get source -qq "coreutils=$version" </dev/null) >&2 \
        || die "apt-get source coreutils=$version failed (see above)"
    [ -f "$src/configure" ] || die "apt-get source did not produce $src/configure"
else
    ensure_packages dpkg-dev gcc make perl libacl1-dev libattr1-dev libcap-dev acl attr
fi

# ---- build once -------------------------------------------------------------------------------
build_log=$cache/build.log
if [ ! -x "$src/src/cp.gnu" ]; then
    if [ ! -f "$src/Makefile" ]; then
        # coreutils refuses to configure as root unless told it is on purpose.
        say "configure (log: $build_log)"
        (cd "$src" && FORCE_UNSAFE_CONFIGURE=1 ./configure --disable-nls --disable-dependency-tracking) >"$build_log" 2>&1 \
            || die "configure failed, see $build_log"
    fi
    say "make -j$(nproc) (a few minutes; log: $build_log)"
    (cd "$src" && make -j"$(nproc)") >>"$build_log" 2>&1 || die "make failed, see $build_log"
    # GNU cp stays as cp.gnu; src/cp becomes a symlink to whichever cp a pass tests.
    mv "$src/src/cp" "$src/src/cp.gnu"
    ln -s cp.gnu "$src/src/cp"
fi

# ---- the unprivileged user --------------------------------------------------------------------
if ! id "$user" >/dev/null 2>&1; then
    say "useradd $user"
    useradd --system --no-create-home --shell /usr/sbin/nologin --user-group --groups users "$user"
fi
[ "$(id -u "$user")" -ne 0 ] || die "--user '$user' is root"

# The tests run in a copy of the build outside the cache: every directory above it must be
# searchable by the non-root user (the root tests run parts of themselves as that user too),
# and the non-root passes must be able to write into it. One fresh copy per run.
run=$(mktemp -d "${TMPDIR:-/tmp}/ringio-gnu-run.XXXXXX")
trap 'rm -rf "$run"' EXIT
say "test tree: $run (a copy of $src, removed at the end)"
cp -a "$src/." "$run/"
# configure wrote the build's absolute path into the Makefile (PATH, abs_top_builddir, the
# config header...); the tests must use the copy, which the non-root user can read.
# The Makefile keeps its old time: a newer one would make `make` regenerate headers and
# rebuild every program, src/cp included.
sed -i "s|$src|$run|g" "$run/Makefile"
touch -r "$src/Makefile" "$run/Makefile"
mkdir -p "$run/ringio-bin"
cp "$ringio" "$run/ringio-bin/ringio"
chown -R "$user:" "$run"
chmod 755 "$run"

# ringio as cp: a symlink if the binary acts as cp under that name, else a wrapper script.
# The probe copies a file under the name cp (--version alone would not tell: clap prints the
# program's own name whatever argv[0] is).
ln -sf ../ringio-bin/ringio "$run/ringio-bin/cp"
probe=$(mktemp -d)
echo probe >"$probe/a"
if "$run/ringio-bin/cp" "$probe/a" "$probe/b" >/dev/null 2>&1 && cmp -s "$probe/a" "$probe/b"; then
    ringio_as_cp="symlink src/cp -> $ringio (multi-call)"
else
    rm "$run/ringio-bin/cp"
    printf '#!/bin/sh\nexec %s cp "$@"\n' "$run/ringio-bin/ringio" >"$run/ringio-bin/cp"
    chmod 755 "$run/ringio-bin/cp"
    chown "$user:" "$run/ringio-bin/cp"
    ringio_as_cp="WRAPPER script src/cp -> 'ringio cp \"\$@\"' ($ringio does not act as cp under that name)"
fi
rm -rf "$probe"
say "ringio as cp: $ringio_as_cp"

mapfile -t tests < <(cd "$run" && for t in tests/cp/$tests_glob.sh; do [ -f "$t" ] && echo "$t"; done)
[ ${#tests[@]} -gt 0 ] || die "no test matches tests/cp/$tests_glob.sh"

# Each run keeps its own logs; logs/latest points at the newest.
logs=$cache/logs/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$logs"
ln -sfn "$(basename "$logs")" "$cache/logs/latest"
declare -A result

# One test, one pass: automake's harness (make check-TESTS) runs it with the environment the
# suite expects. The test's shell runs under timeout(1), which kills the test's whole process
# group at the limit; the harness then records exit status 124 and keeps the log. The outer
# timeout is only a backstop for make itself.
run_test() {
    local pass=$1 t=$2 name log rc=0 res
    name=$(basename "$t" .sh)
    log=$logs/$pass/$name.log
    rm -f "$run/${t%.sh}.log" "$run/${t%.sh}.trs"
    local make_cmd=(make -s check-TESTS SUBDIRS=. TESTS="$t" VERBOSE=yes
        SH_LOG_COMPILER="timeout -k 10 $timeout_s /bin/bash"
        NON_ROOT_USERNAME="$user" RUN_EXPENSIVE_TESTS="$expensive")
    if [ "${pass#*-}" = user ]; then
        make_cmd=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups
            env HOME="$run" "${make_cmd[@]}")
    fi
    (cd "$run" && timeout -k 10 $((timeout_s + 60)) "${make_cmd[@]}") >"$logs/$pass/$name.make" 2>&1 || rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] \
        || grep -qE '^FAIL .*\(exit status: (124|137)\)$' "$run/${t%.sh}.log" 2>/dev/null; then
        res=HANG
    elif [ -f "$run/${t%.sh}.trs" ]; then
        res=$(sed -n 's/^:test-result: //p' "$run/${t%.sh}.trs" | head -n1)
        [ "$res" = ERROR ] && res=FAIL
        [ "$res" = XFAIL ] && res=PASS
    else
        res=FAIL
    fi
    [ -L "$run/src/cp" ] || die "make rebuilt src/cp during $t (see $logs/$pass/$name.make)"
    if [ -f "$run/${t%.sh}.log" ]; then cp "$run/${t%.sh}.log" "$log"; else : >"$log"; fi
    echo "== make exit status $rc, result $res" >>"$log"
    result[$pass/$name]=$res
    printf '%-28s %-12s %s\n' "$name" "$pass" "$res" >&2
}

for pass in ${passes//,/ }; do
    mkdir -p "$logs/$pass"
    case "$pass" in
        gnu-*) ln -sfn cp.gnu "$run/src/cp" ;;
        ringio-*) ln -sfn ../ringio-bin/cp "$run/src/cp" ;;
    esac
    chown -h "$user:" "$run/src/cp"
    say "pass $pass: src/cp -> $(readlink "$run/src/cp")"
    for t in "${tests[@]}"; do run_test "$pass" "$t"; done
done
ln -sfn cp.gnu "$run/src/cp"

# ---- the table --------------------------------------------------------------------------------
table() {
    local cols=(gnu-root ringio-root gnu-user ringio-user) heads=("GNU cp (root)" "ringio (root)"
        "GNU cp (non-root)" "ringio (non-root)") c t name r
    declare -A pass_n
    echo "coreutils $version tests/cp; ringio: $ringio_as_cp; timeout ${timeout_s}s;" \
        "expensive tests: $expensive"
    echo
    printf '| %-26s |' test
    for c in "${heads[@]}"; do printf ' %-17s |' "$c"; done
    echo
    printf '|%s|' "----------------------------"
    for c in "${heads[@]}"; do printf '%s|' "-------------------"; done
    echo
    for t in "${tests[@]}"; do
        name=$(basename "$t" .sh)
        printf '| %-26s |' "$name"
        for c in "${cols[@]}"; do
            r=${result[$c/$name]:--}
            printf ' %-17s |' "$r"
            [ "$r" = PASS ] && pass_n[$c]=$((${pass_n[$c]:-0} + 1))
        done
        echo
    done
    printf '| %-26s |' "PASS (of ${#tests[@]})"
    for c in "${cols[@]}"; do printf ' %-17s |' "${pass_n[$c]:-0}"; done
    echo
    for kind in FAIL SKIP HANG; do
        printf '| %-26s |' "$kind"
        for c in "${cols[@]}"; do
            local n=0
            for t in "${tests[@]}"; do
                [ "${result[$c/$(basename "$t" .sh)]:-}" = "$kind" ] && n=$((n + 1))
            done
            printf ' %-17s |' "$n"
        done
        echo
    done
}
table | tee "$logs/table.txt"
echo
echo "logs (with the shell trace): $logs/<pass>/<test>.log (make's own output: .make); table: $logs/table.txt"

# ---- strict: the gate -------------------------------------------------------------------------
# Every pass counts (GNU cp's too: a failure there means the suite or the machine is broken).
[ "$strict" = yes ] || exit 0
gate() {
    local pass name res log who why bad=0 n=0 skip_line
    for pass in ${passes//,/ }; do
        who=${pass#*-}
        for t in "${tests[@]}"; do
            name=$(basename "$t" .sh)
            res=${result[$pass/$name]:-FAIL}
            log=$logs/$pass/$name.log
            n=$((n + 1))
            why=""
            case "$res" in
                PASS) ;;
                SKIP)
                    skip_line=$(grep -m1 -o 'skipped test: .*' "$log" 2>/dev/null | sed "s/'\$//" || true)
                    if [ -z "${expected[$who/$name]:-}" ]; then
                        why="SKIP not in $expected_skips for $who (${skip_line:-no reason in the log})"
                    elif ! grep -qF "skipped test: ${expected[$who/$name]}" "$log"; then
                        why="SKIP for another reason than the listed '${expected[$who/$name]}' (${skip_line:-none in the log})"
                    fi
                    ;;
                *) why=$res ;;
            esac
            if [ -n "$why" ]; then
                echo "STRICT: $pass/$name: $why; log: $log"
                bad=$((bad + 1))
            fi
        done
    done
    if [ "$bad" -gt 0 ]; then
        echo "STRICT: FAILED: $bad of $n test runs failed the gate (passes: $passes)"
        return 1
    fi
    echo "STRICT: ok: $n test runs, every one PASS or an expected SKIP (passes: $passes)"
}
gate | tee -a "$logs/table.txt"
exit "${PIPESTATUS[0]}"
