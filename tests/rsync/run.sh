#!/usr/bin/env bash
# rsync's own testsuite (testsuite/*.test through its runtests.sh), run against the rsync it
# builds (the baseline), against ringio in rsync's place, and against /bin/false (to find the
# tests that only exercise rsync's helper programs). See --help.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: tests/rsync/run.sh [OPTION]...

Run rsync's testsuite/*.test with rsync, with ringio as rsync and with /bin/false as rsync,
and print a table.

Fetches Debian's source package of the rsync this machine ships (the installed version, else
apt's candidate; apt-get source, adding deb-src entries if needed), builds rsync and the
suite's helpers (tls, testrun, getgroups, getfsdev, trimslash, t_unsafe, t_chmod_secure,
t_secure_relpath, wildtest, simdtest: what `make check` builds) once into the cache
directory, then runs each test through the suite's own runtests.sh (whichtests=NAME.test,
always_log=yes) once per pass, as root. Must run as root (build dependencies, deb-src entry).

Options:
  --ringio PATH    the ringio binary to test (default: build this repository's release
                   binary with cargo and use target/release/ringio)
  --cache DIR      where the source, the build and the logs live
                   (default: ${XDG_CACHE_HOME:-$HOME/.cache}/ringio-rsync)
  --timeout SEC    per-test time limit; a test still running then is a HANG (default: 120).
                   The suite's own testrun also stops a test after 300 s (600 s for
                   hardlinks); that too shows as HANG
  --tests GLOB     run only the tests whose name matches GLOB, e.g. 'exclude*' (default: *)
  --passes LIST    comma-separated subset of rsync,ringio,false (default: all three)
  --remote         also run the remote tests in the ringio and false passes (they never
                   count; by default only the rsync pass runs them, and the table shows
                   '-' for the others: with a binary that does not act as rsync, one of
                   them, proxy-response-line-too-long, waits for a connection until the
                   timeout)
  --strict         gate, do not only report: exit 1 when a test of the rsync or ringio
                   pass FAILs or HANGs, or SKIPs without being listed, for its reason, in
                   tests/rsync/expected-skips; each such test is named with its log. The
                   false pass never gates (nearly everything fails there by design). The
                   default when the environment sets CI (non-empty), as .ci/run does.
                   A test listed in tests/rsync/timing-dependent that FAILs is run again, up
                   to 3 runs in all; it passes the gate if one run passes, and the output
                   says so with the failed runs' logs
  --no-strict      report only, even with CI set: exit 0 whatever the tests did
  -h, --help       show this help

Exit status: 0; 1 when no source can be fetched, the build fails, or (strict) a test failed
the gate; 2 for a bad argument.

Passes. The build directory's `rsync` is a symlink to the binary a pass tests, and
runtests.sh gets rsync_bin=<that symlink>, so RSYNC="<dir>/rsync" in every test:
  rsync    the rsync built from the source package
  ringio   ringio, through a symlink named rsync (ringio acts as rsync under that name).
           The probe runs `rsync -a A B` under that name; if that does not copy, a two-line
           wrapper script running `ringio sync "$@"` is used instead, and the output says so
  false    /bin/false: a test that PASSES with it tests rsync's helper programs (tls,
           wildtest, trimslash, t_unsafe, simdtest...), not rsync

Which tests count: those that are local (no remote shell, no daemon), that do not pass
with /bin/false (helper-only), and that rsync does not SKIP here. Remote tests are found
in the test scripts (comments aside): RSYNC_CONNECT_PROG, --daemon, --server, rsync://,
localhost:, lh:, support/lsh.sh, RSYNC_RSH, --rsh, ssh. A script that turns remote only
under a -lsh name (exclude.test / exclude-lsh.test) is remote only under that name.
The table says why a test does not count.

What the suite itself asks of the binary, beyond the transfers under test:
  rsync -VV        JSON-ish capability list; tests grep it and SKIP when a line is absent:
                   '"ACLs": true' (acls, acls-default), '"xattrs": true' (xattrs, and
                   chown/devices under their -fake names), '"atimes": true' (atimes),
                   '"crtimes": true' (crtimes), '"hardlink_specials": true' (devices);
                   itemize picks its expected output by '"hardlink_symlinks": true'
                   and '"symtimes": true', so these must say what the binary does
  rsync --version, --info=help, --debug=help   (00-hello; must exit 0)
  remote tests also run `rsync --daemon --config=...` through RSYNC_CONNECT_PROG, the
  server side through support/lsh.sh with --rsync-path="$RSYNC", and `--server`; those
  tests do not count.
Tests run as root here. As non-root, chown, devices, protected-regular and parts of others
SKIP or take other paths (fakeroot, --fake-super); this script runs only the root passes.

The tests run in a fresh copy of the build, ${TMPDIR:-/tmp}/ringio-rsync-run.XXXXXX (each
test in its testtmp/NAME, HOME pointing there), with a clean environment (PATH, LC_ALL=C,
no RSYNC_* variables); it is removed at the end.

Logs, with runtests.sh's output and the test's own log: <cache>/logs/<UTC time>/<pass>/<test>.log,
and the table in <cache>/logs/<UTC time>/table.txt; <cache>/logs/latest is the newest run.
A version of the source that apt cannot fetch is remembered in <cache>/rsync_<version>.unavailable
(delete it to retry); the newest version apt can fetch is used instead, and the table says so.
EOF
}

repo=$(cd "$(dirname "$0")/../.." && pwd)
ringio=""
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ringio-rsync"
timeout_s=120
tests_glob='*'
passes=rsync,ringio,false
remote_too=no
strict=no
[ -n "${CI:-}" ] && strict=yes
expected_skips=$(dirname "$0")/expected-skips
timing_list=$(dirname "$0")/timing-dependent

while [ $# -gt 0 ]; do
    case "$1" in
        --ringio) ringio=$2; shift 2 ;;
        --ringio=*) ringio=${1#*=}; shift ;;
        --cache) cache=$2; shift 2 ;;
        --cache=*) cache=${1#*=}; shift ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --timeout=*) timeout_s=${1#*=}; shift ;;
        --tests) tests_glob=$2; shift 2 ;;
        --tests=*) tests_glob=${1#*=}; shift ;;
        --passes) passes=$2; shift 2 ;;
        --passes=*) passes=${1#*=}; shift ;;
        --remote) remote_too=yes; shift ;;
        --strict) strict=yes; shift ;;
        --no-strict) strict=no; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

say() { echo "== $*" >&2; }
die() { echo "run.sh: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get source, build dependencies)"
case "$timeout_s" in '' | *[!0-9]*) die "--timeout '$timeout_s': not a number of seconds" ;; esac
for p in ${passes//,/ }; do
    case "$p" in rsync | ringio | false) ;;
        *) die "--passes: unknown pass '$p' (rsync, ringio, false)" ;;
    esac
done
has_pass() { case ",$passes," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# ---- the expected skips (strict mode) ---------------------------------------------------------
# tests/rsync/expected-skips: `TEST REASON...` a line, # comments. A SKIP passes the gate only
# if it is listed and the suite's line says `SKIP    TEST (REASON)`.
declare -A expected
if [ "$strict" = yes ]; then
    [ -f "$expected_skips" ] || die "strict: no list of expected skips at $expected_skips"
    lineno=0
    while IFS= read -r line || [ -n "$line" ]; do
        lineno=$((lineno + 1))
        line=${line%%#*}
        read -r name reason <<<"$line" || true
        [ -n "${name:-}" ] || continue
        [ -n "${reason:-}" ] || die "$expected_skips:$lineno: $name: no reason"
        expected[$name]=$reason
    done <"$expected_skips"
fi
# tests/rsync/timing-dependent: `TEST WHY...` a line, # comments: tests whose result depends on
# the clock or the scheduler for a reason docs/CONFORMANCE.md gives. Strict runs retry them.
declare -A timing
if [ "$strict" = yes ] && [ -f "$timing_list" ]; then
    lineno=0
    while IFS= read -r line || [ -n "$line" ]; do
        lineno=$((lineno + 1))
        line=${line%%#*}
        read -r name why <<<"$line" || true
        [ -n "${name:-}" ] || continue
        [ -n "${why:-}" ] || die "$timing_list:$lineno: $name: no reason"
        timing[$name]=$why
    done <"$timing_list"
fi

# ---- the ringio binary ----------------------------------------------------------------------
if has_pass ringio; then
    if [ -z "$ringio" ]; then
        say "cargo build --release -p ringio"
        (cd "$repo" && nice cargo build --release -p ringio --quiet)
        ringio=$repo/target/release/ringio
    fi
    [ -x "$ringio" ] || die "--ringio '$ringio': not an executable file"
    ringio=$(realpath "$ringio")
fi

# ---- Debian's source package of the rsync this machine ships ----------------------------------
mkdir -p "$cache"
cache=$(realpath "$cache")
# One run at a time per cache: the build and the logs are shared.
exec 9>"$cache/.lock"
if ! flock -n 9; then
    say "another run is using $cache: waiting for it (at most 30 minutes)"
    flock -w 1800 9 || die "another run is still using $cache after 30 minutes"
fi

apt_updated=""
apt_update() { [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }; }

ensure_packages() {
    local missing=() pkg
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    [ ${#missing[@]} -eq 0 ] && return
    say "apt-get install ${missing[*]}"
    apt_update
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The upstream part of a Debian version: no epoch, no Debian revision (the name of the
# directory dpkg-source unpacks into is rsync-<upstream>).
upstream_of() { local v=${1#*:}; echo "${v%-*}"; }

# deb-src entries mirroring every deb entry (URI, suite) that has no deb-src entry yet, in
# /etc/apt/sources.list.d/ringio-rsync-src.sources; nothing if all are covered.
src_list=/etc/apt/sources.list.d/ringio-rsync-src.sources
ensure_deb_src() {
    local files pairs type uri suite comps key
    files=$(ls /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$files" ] || die "no /etc/apt/sources.list* to derive a deb-src entry from"
    # One line per (type, uri, suite, components) of every entry, both formats.
    # shellcheck disable=SC2086
    pairs=$(awk '
        function flush(  i, j, ts, us, ss, nt, nu, ns) {
            nt = split(types, ts, " "); nu = split(uris, us, " "); ns = split(suites, ss, " ")
            for (t = 1; t <= nt; t++) for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
                print ts[t], us[i], ss[j], comps
            types = uris = suites = comps = ""
        }
        FNR == 1 { flush() }
        /^[ \t]*#/ { next }
        /^(deb|deb-src)[ \t]/ && FILENAME ~ /\.list$/ {
            line = $0; sub(/\[[^]]*\]/, "", line); n = split(line, f, /[ \t]+/)
            c = ""; for (k = 4; k <= n; k++) c = c " " f[k]
            print f[1], f[2], f[3], substr(c, 2); next
        }
        /^[ \t]*$/ { flush(); next }
        /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
        /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
        /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
        /^Components:/ { sub(/^Components:[ \t]*/, ""); comps = $0 }
        END { flush() }' $files)
    local have add=""
    have=$(awk '$1 == "deb-src" { sub(/\/$/, "", $2); print $2, $3 }' <<<"$pairs")
    while read -r type uri suite comps; do
        [ "$type" = deb ] || continue
        key="${uri%/} $suite"
        grep -qxF "$key" <<<"$have" && continue
        have+=$'\n'"$key"
        add+="$key $comps"$'\n'
    done <<<"$pairs"
    [ -n "$add" ] || return 0
    say "adding deb-src entries ($src_list):"
    while read -r uri suite comps; do
        [ -n "$uri" ] || continue
        echo "   $uri $suite $comps" >&2
        printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: %s\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' \
            "$uri" "$suite" "$comps"
    done <<<"$add" >>"$src_list"
    apt_updated=""
}

# autoconf: the unpacked sources' timestamps can make rsync's Makefile regenerate configure.sh.
ensure_packages dpkg-dev gcc g++ make autoconf libacl1-dev libattr1-dev libpopt-dev liblz4-dev \
    libxxhash-dev libzstd-dev zlib1g-dev libssl-dev acl attr

# The version this machine ships: the installed one, else apt's candidate.
shipped=$(dpkg-query -W -f='${Version}' rsync 2>/dev/null || true)
shipped_how=installed
if [ -z "$shipped" ]; then
    shipped=$(apt-cache policy rsync | sed -n 's/^ *Candidate: //p')
    shipped_how="not installed; apt candidate"
    if [ -z "$shipped" ] || [ "$shipped" = "(none)" ]; then
        apt_update
        shipped=$(apt-cache policy rsync | sed -n 's/^ *Candidate: //p')
    fi
fi
if [ -z "$shipped" ] || [ "$shipped" = "(none)" ]; then die "apt knows no rsync package"; fi

# The source: the shipped version if apt can fetch it (or it is in the cache), else the newest
# source version apt can fetch.
version="" src="" marked=()
try_version() {
    local v=$1 d
    d=$cache/rsync-$(upstream_of "$v")
    if [ -f "$d/runtests.sh" ] && [ -f "$cache/rsync_$v.unpacked" ]; then
        version=$v src=$d; return 0
    fi
    [ -f "$cache/rsync_$v.unavailable" ] && return 1
    ensure_deb_src
    apt_update
    say "apt-get source rsync=$v into $cache"
    rm -rf "$d"
    if (cd "$cache" && apt-get source -qq "rsync=$v" </dev/null) >&2 2>&1 && [ -f "$d/runtests.sh" ]; then
        touch "$cache/rsync_$v.unpacked"
        version=$v src=$d; return 0
    fi
    say "apt-get source rsync=$v failed; remembered in $cache/rsync_$v.unavailable"
    touch "$cache/rsync_$v.unavailable"
    marked+=("$cache/rsync_$v.unavailable")
    return 1
}
if ! try_version "$shipped"; then
    # The cache first, then apt, newest first.
    for v in $(for f in "$cache"/rsync_*.unpacked; do [ -f "$f" ] && basename "$f" .unpacked; done \
        | sed 's/^rsync_//' | sort -rV); do
        try_version "$v" && break
    done
    if [ -z "$version" ]; then
        ensure_deb_src
        apt_update
        for v in $(apt-cache showsrc rsync | sed -n 's/^Version: //p' | sort -urV); do
            try_version "$v" && break
        done
    fi
fi
if [ -z "$version" ]; then
    # Nothing could be fetched: more likely the network or apt than every version gone. Forget
    # this run's marks, so that the next run tries again instead of failing at once.
    [ ${#marked[@]} -eq 0 ] || rm -f "${marked[@]}"
    die "could not fetch any source version of rsync (see above)"
fi
if [ "$version" = "$shipped" ]; then
    source_note="rsync $version ($shipped_how)"
else
    source_note="rsync $version source (the shipped $shipped, $shipped_how, has no fetchable source)"
fi
say "source: $source_note: $src"

# ---- build once -------------------------------------------------------------------------------
build_log=$cache/build-$version.log
if [ ! -f "$src/.ringio-built" ]; then
    if [ ! -f "$src/Makefile" ]; then
        # Debian's configure options (debian/rules), without the manual pages (they need
        # python3-cmarkgfm).
        say "configure (log: $build_log)"
        (cd "$src" && nice ./configure --with-included-zlib=no --disable-md5-asm --disable-md2man) \
            >"$build_log" 2>&1 </dev/null || die "configure failed, see $build_log"
    fi
    say "make -j$(nproc) (log: $build_log)"
    (cd "$src" && nice make -j"$(nproc)") >>"$build_log" 2>&1 </dev/null || die "make failed, see $build_log"
    # What `make check` builds besides: $(CHECK_PROGS) and $(CHECK_SYMLINKS), read from the
    # Makefile itself (after the first make, which may print while it regenerates files).
    check_targets=$(cd "$src" && make -s -f Makefile -f - print-check-targets <<'EOF' | tail -n1
print-check-targets:
	@echo $(CHECK_PROGS) $(CHECK_SYMLINKS)
EOF
    )
    [ -n "$check_targets" ] || die "no CHECK_PROGS in $src/Makefile"
    say "make $check_targets"
    # shellcheck disable=SC2086
    (cd "$src" && nice make -j"$(nproc)" $check_targets) >>"$build_log" 2>&1 </dev/null \
        || die "make of the test helpers failed, see $build_log"
    touch "$src/.ringio-built"
fi

# ---- the test tree ----------------------------------------------------------------------------
run=$(mktemp -d "${TMPDIR:-/tmp}/ringio-rsync-run.XXXXXX")
trap 'rm -rf "$run"' EXIT
say "test tree: $run (a copy of $src, removed at the end)"
cp -a "$src/." "$run/"
rm -rf "$run/testtmp"
# The built rsync stays as rsync.built; rsync becomes a symlink to whichever binary a pass tests.
mv "$run/rsync" "$run/rsync.built"
mkdir -p "$run/ringio-bin"

ringio_as_rsync="-"
if has_pass ringio; then
    cp "$ringio" "$run/ringio-bin/ringio"
    # ringio as rsync: a symlink if the binary acts as rsync under that name, else a wrapper.
    # The probe copies a file under the name rsync (--version alone would not tell: clap
    # prints the program's own name whatever argv[0] is).
    ln -sf ringio "$run/ringio-bin/rsync"
    probe=$(mktemp -d)
    echo probe >"$probe/a"
    if timeout -k 5 20 "$run/ringio-bin/rsync" -a "$probe/a" "$probe/b" </dev/null >/dev/null 2>&1 \
        && cmp -s "$probe/a" "$probe/b"; then
        ringio_as_rsync="symlink rsync -> $ringio (multi-call)"
    else
        rm "$run/ringio-bin/rsync"
        printf '#!/bin/sh\nexec %s sync "$@"\n' "$run/ringio-bin/ringio" >"$run/ringio-bin/rsync"
        chmod 755 "$run/ringio-bin/rsync"
        ringio_as_rsync="WRAPPER script rsync -> 'ringio sync \"\$@\"' ($ringio does not act as rsync under that name)"
    fi
    rm -rf "$probe"
    say "ringio as rsync: $ringio_as_rsync"
fi

mapfile -t tests < <(cd "$run/testsuite" && for t in $tests_glob.test; do [ -f "$t" ] && echo "${t%.test}"; done)
[ ${#tests[@]} -gt 0 ] || die "no test matches testsuite/$tests_glob.test"

# Remote tests: the script (comments aside) uses a remote shell or a daemon. exclude.test is
# remote only under its -lsh name (it sets RSYNC_RSH only in that case).
remote_re='RSYNC_CONNECT_PROG|--daemon|--server|rsync://|localhost:|[^a-z]lh:|lsh\.sh|RSYNC_RSH|--rsh|(^|[^a-z_-])ssh([^a-z_-]|$)'
is_remote() {
    local f=$run/testsuite/$1.test
    if grep -q -- '\*-lsh\.\*)' "$f"; then
        case "$1" in *-lsh) return 0 ;; *) return 1 ;; esac
    fi
    # Not `grep -v ... | grep -q`: under pipefail, grep -q's early exit can kill the first grep
    # with SIGPIPE and turn a match into a failure (a remote test then counted as local).
    local body
    body=$(grep -v '^[[:space:]]*#' "$f")
    grep -qE -- "$remote_re" <<<"$body"
}

# Each run keeps its own logs; logs/latest points at the newest.
logs=$cache/logs/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$logs"
ln -sfn "$(basename "$logs")" "$cache/logs/latest"
declare -A result

# The environment of every test: nothing from ours that rsync or the suite reads
# (RSYNC_RSH, RSYNC_CONNECT_PROG, RSYNC_OLD_ARGS, TOOLDIR, scratchbase, loglevel...).
clean_env=(env -i "PATH=$PATH" "HOME=$run" LC_ALL=C "TMPDIR=${TMPDIR:-/tmp}")

# One test, one pass: runtests.sh runs it (through testrun) with the environment the suite
# expects. timeout(1) kills the whole process group at the limit (exit status 124, or 137 after
# the KILL that follows 10 s later).
run_test() {
    local pass=$1 name=$2 log rc=0 res
    log=$logs/$pass/$name.log
    (cd "$run" && timeout -k 10 "$timeout_s" "${clean_env[@]}" rsync_bin="$run/rsync" \
        whichtests="$name.test" always_log=yes ./runtests.sh) </dev/null >"$log" 2>&1 || rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || grep -q '^TESTRUN TIMEOUT' "$log"; then
        res=HANG
    else
        res=$(sed -nE "s/^(PASS|FAIL|SKIP|XFAIL) +$name( .*)?\$/\\1/p" "$log" | head -n1)
        case "$res" in PASS | SKIP) ;; *) res=FAIL ;; esac
    fi
    echo "== runtests.sh exit status $rc, result $res" >>"$log"
    # A test's scratch directory stays after a failure; its log is in ours.
    rm -rf "${run:?}/testtmp/$name"
    result[$pass/$name]=$res
    printf '%-36s %-8s %s\n' "$name" "$pass" "$res" >&2
}

# Strict: a FAIL of a timing-dependent test is run again (3 runs at most); the failed runs'
# logs are kept as NAME.try1.log, NAME.try2.log.
declare -A retried
run_test_strict() {
    local pass=$1 name=$2 try=1
    run_test "$pass" "$name"
    while [ "$strict" = yes ] && [ "$pass" != false ] && [ "${result[$pass/$name]}" = FAIL ] \
        && [ -n "${timing[$name]:-}" ] && [ "$try" -lt 3 ]; do
        mv "$logs/$pass/$name.log" "$logs/$pass/$name.try$try.log"
        retried[$pass/$name]+="$logs/$pass/$name.try$try.log "
        try=$((try + 1))
        say "$name: FAIL; listed in $timing_list: run $try of 3"
        run_test "$pass" "$name"
    done
}

declare -A pass_secs
for pass in ${passes//,/ }; do
    mkdir -p "$logs/$pass"
    case "$pass" in
        rsync) ln -sfn rsync.built "$run/rsync" ;;
        ringio) ln -sfn ringio-bin/rsync "$run/rsync" ;;
        false) ln -sfn /bin/false "$run/rsync" ;;
    esac
    say "pass $pass: rsync -> $(readlink "$run/rsync")"
    start=$SECONDS
    for name in "${tests[@]}"; do
        if [ "$pass" != rsync ] && [ "$remote_too" = no ] && is_remote "$name"; then continue; fi
        run_test_strict "$pass" "$name"
    done
    pass_secs[$pass]=$((SECONDS - start))
done

# ---- the table --------------------------------------------------------------------------------
table() {
    local name why counted=() rsync_pass=() ringio_pass=() ringio_fail=() ringio_skip=() helper=() remote=()
    local rs rg fa
    echo "$source_note: testsuite/*.test via runtests.sh, as root; ringio: $ringio_as_rsync;" \
        "timeout ${timeout_s}s; passes: $passes"
    for p in ${passes//,/ }; do echo "pass $p: ${pass_secs[$p]} s"; done
    echo
    printf '| %-34s | %-6s | %-6s | %-6s | %-26s |\n' test rsync ringio false counted
    printf '|%s|%s|%s|%s|%s|\n' "------------------------------------" "--------" "--------" \
        "--------" "----------------------------"
    for name in "${tests[@]}"; do
        rs=${result[rsync/$name]:--} rg=${result[ringio/$name]:--} fa=${result[false/$name]:--}
        why=yes
        if is_remote "$name"; then
            why="no: remote"; remote+=("$name")
        elif [ "$fa" = PASS ]; then
            why="no: helper-only"; helper+=("$name")
        elif [ "$rs" = SKIP ]; then
            why="no: skipped by rsync here"
        fi
        if [ "$why" = yes ]; then
            counted+=("$name")
            # Without an rsync pass, ringio is measured on every counted test.
            if [ "$rs" = PASS ] || ! has_pass rsync; then
                rsync_pass+=("$name")
                if [ "$rg" = PASS ]; then
                    ringio_pass+=("$name")
                elif [ "$rg" = SKIP ] && ! has_pass rsync; then
                    # Whether rsync skips it too is unknown here (strict runs judge it by the list).
                    ringio_skip+=("$name")
                else
                    ringio_fail+=("$name($rg)")
                fi
            fi
        fi
        printf '| %-34s | %-6s | %-6s | %-6s | %-26s |\n' "$name" "$rs" "$rg" "$fa" "$why"
    done
    echo
    has_pass false || echo "(the false pass did not run: helper-only tests are not excluded)"
    has_pass rsync || echo "(the rsync pass did not run: rsync's skips and passes are unknown)"
    echo "remote (not counted): ${remote[*]:-none}"
    echo "helper-only, PASS with /bin/false as rsync (not counted): ${helper[*]:-none}"
    local p_n=${#rsync_pass[@]}
    has_pass rsync || p_n="? (not run)"
    has_pass ringio || ringio_fail=("? (not run)")
    echo "counted: ${#counted[@]}; rsync passes $p_n; ringio passes ${#ringio_pass[@]} of those;" \
        "ringio fails: ${ringio_fail[*]:-none}"
    has_pass rsync || echo "ringio skips (rsync's skips unknown without its pass): ${ringio_skip[*]:-none}"
}
table | tee "$logs/table.txt"
echo
echo "logs: $logs/<pass>/<test>.log; table: $logs/table.txt"

# ---- strict: the gate -------------------------------------------------------------------------
# The rsync pass counts too (a failure of rsync itself means the suite or the machine is broken);
# the false pass does not. A test a pass did not run (remote, outside --tests) is not judged.
[ "$strict" = yes ] || exit 0
gate() {
    local pass name res log why bad=0 n=0 skip_line
    for pass in ${passes//,/ }; do
        [ "$pass" = false ] && continue
        for name in "${tests[@]}"; do
            [ -n "${result[$pass/$name]:-}" ] || continue
            # Remote tests count in the rsync pass only (--remote runs them in the others too).
            if [ "$pass" != rsync ] && is_remote "$name"; then continue; fi
            res=${result[$pass/$name]}
            log=$logs/$pass/$name.log
            n=$((n + 1))
            why=""
            case "$res" in
                PASS) ;;
                SKIP)
                    skip_line=$(sed -nE "s/^SKIP +$name +\((.*)\)\$/\1/p" "$log" | head -n1)
                    if [ -z "${expected[$name]:-}" ]; then
                        why="SKIP not in $expected_skips (${skip_line:-no reason in the log})"
                    elif [ "$skip_line" != "${expected[$name]}" ]; then
                        why="SKIP for another reason than the listed '${expected[$name]}' (${skip_line:-none in the log})"
                    fi
                    ;;
                *) why=$res ;;
            esac
            if [ -n "$why" ]; then
                echo "STRICT: $pass/$name: $why; log: $log"
                bad=$((bad + 1))
            fi
            if [ -n "${retried[$pass/$name]:-}" ]; then
                echo "STRICT: note: $pass/$name failed and was run again (timing-dependent:" \
                    "${timing[$name]}); result of the last run: $res; failed runs' logs: ${retried[$pass/$name]% }"
            fi
        done
    done
    if [ "$n" -eq 0 ]; then
        echo "STRICT: FAILED: no test ran in a gating pass (passes: $passes)"
        return 1
    fi
    if [ "$bad" -gt 0 ]; then
        echo "STRICT: FAILED: $bad of $n test runs failed the gate (passes: $passes)"
        return 1
    fi
    echo "STRICT: ok: $n test runs, every one PASS or an expected SKIP (passes: $passes)"
}
gate | tee -a "$logs/table.txt"
exit "${PIPESTATUS[0]}"
