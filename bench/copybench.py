#!/usr/bin/env python3
"""Side-by-side copy benchmark: ringio against cp, rsync, xcp, fcp, cpz and a syscall floor.

    python3 bench/copybench.py --workload 50k-mixed --tools ringio,cp,rsync,xcp,cpz,floor --runs 5
    python3 bench/copybench.py --workload 1g --workload 16x64m --tools ringio,cp,xcp --runs 5 --cold
    python3 bench/copybench.py --check          # a tiny tree through every available tool

Workloads are generated once under ROOT (default /var/tmp/ringio-bench) and reused while their
marker file matches. Every run copies ROOT/src-NAME to ROOT/dst/copy, which must not exist before
(the tool creates it). The measurement rules of the design are applied to every tool alike, all
outside the timed region:

  * the previous destination is renamed into ROOT/trash, never deleted between runs (on ext4
    without a journal, deleted inodes make every new inode allocation slow for about 60 s);
    the trash is emptied after the last run, and a later invocation waits out that minute;
  * `sync`, and with --cold also `echo 3 > /proc/sys/vm/drop_caches`;
  * about as much anonymous memory as the run will use is touched and freed right before the run
    (the VM hands idle free pages back to the host, and touching them again is 10-20x slower).

Each tool runs under bench/runstat (wall time, user/sys time and a peak RSS that is the tool's
own; Python's wait4 would report the Python parent's RSS). After each run: `sync`, then the copy
is verified against digests of the source (names, types, sizes, contents, link targets; mode and
mtime where the tool claims to preserve them) and its pages are evicted from the cache.
Tools run round-robin (run 1 of every tool, then run 2 ...), the order rotating each round.
Only the Python standard library is used; bench/floor/floor and bench/runstat/runstat are built
with cc when missing.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import mmap
import os
import platform
import random
import shlex
import shutil
import stat
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
PAGE_SIZE = 4096

BENCH_DIR = Path(__file__).resolve().parent
FLOOR_SOURCE = BENCH_DIR / "floor" / "floor.c"
FLOOR_BINARY = BENCH_DIR / "floor" / "floor"
RUNSTAT_SOURCE = BENCH_DIR / "runstat" / "runstat.c"
RUNSTAT_BINARY = BENCH_DIR / "runstat" / "runstat"
DEFAULT_ROOT = Path("/var/tmp/ringio-bench")
DEFAULT_RINGIO = BENCH_DIR.parent / "target" / "release" / "ringio"
DEFAULT_TOOLS = "ringio,ringio-a,cp,cp-a,rsync,xcp,fcp,cpz,floor"

GENERATOR_VERSION = 1
SEED = 0x51_6E_67_10  # any fixed number; part of the marker
# Real trees to copy for the `src-tree` workload, first existing one wins (--src-tree overrides).
REAL_TREE_CANDIDATES = ["/usr/include", "~/.cargo/registry/src", "/usr/share/doc",
                        "/usr/lib/python3"]
# After deleting this many inodes, wait out ext4's "recently deleted" window before timing.
MANY_INODES = 1000
EXT4_RECENTLY_DELETED_SECONDS = 61


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Tree snapshots: used for workload summaries and for verifying copies
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    kind: str  # "dir", "file", "symlink" or "other"
    size: int
    mode: int  # permission bits only
    mtime_ns: int
    target: Optional[str] = None  # symlinks only


def node_from_stat(st: os.stat_result, path: str) -> Node:
    if stat.S_ISDIR(st.st_mode):
        kind, target = "dir", None
    elif stat.S_ISREG(st.st_mode):
        kind, target = "file", None
    elif stat.S_ISLNK(st.st_mode):
        kind, target = "symlink", os.readlink(path)
    else:
        kind, target = "other", None
    size = st.st_size if kind == "file" else 0
    return Node(kind, size, stat.S_IMODE(st.st_mode), st.st_mtime_ns, target)


def scan_tree(root: Path) -> dict[str, Node]:
    """Every entry under root (root itself as "."), by relative path, without following links."""
    nodes = {".": node_from_stat(os.lstat(root), str(root))}
    pending = [(str(root), "")]
    while pending:
        directory, rel_dir = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                node = node_from_stat(entry.stat(follow_symlinks=False), entry.path)
                nodes[rel] = node
                if node.kind == "dir":
                    pending.append((entry.path, rel))
    return nodes


@dataclass
class TreeSummary:
    files: int
    dirs: int
    symlinks: int
    bytes: int

    @classmethod
    def of(cls, nodes: dict[str, Node]) -> "TreeSummary":
        kinds = [n.kind for n in nodes.values()]
        return cls(files=kinds.count("file"), dirs=kinds.count("dir"),
                   symlinks=kinds.count("symlink"),
                   bytes=sum(n.size for n in nodes.values()))

    def describe(self) -> str:
        return (f"{plural(self.files, 'file')}, {plural(self.dirs, 'dir')}, "
                f"{plural(self.symlinks, 'symlink')}, {format_bytes(self.bytes)}")


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------

def write_random_file(path: Path, size: int, rng: random.Random) -> None:
    chunk = 16 * MiB
    with open(path, "wb") as f:
        remaining = size
        while remaining > 0:
            n = min(chunk, remaining)
            f.write(rng.randbytes(n))
            remaining -= n


def generate_flat_directory(dest: Path, rng: random.Random, count: int, size: int) -> dict:
    dest.mkdir()
    width = max(4, len(str(count - 1)))
    for i in range(count):
        write_random_file(dest / f"{i:0{width}d}.bin", size, rng)
    set_deterministic_times(dest, rng)
    return {}


def plan_directories(rng: random.Random, count: int, max_depth: int) -> list[str]:
    """A random recursive tree: each new directory picks a random existing parent that is not
    yet at max_depth. Returns relative paths, parents before children ("" is the root)."""
    dirs = [""]
    depth = {"": 0}
    open_parents = [""]
    for i in range(1, count):
        parent = rng.choice(open_parents)
        path = f"{parent}/d{i:04d}" if parent else f"d{i:04d}"
        dirs.append(path)
        depth[path] = depth[parent] + 1
        if depth[path] < max_depth:
            open_parents.append(path)
    return dirs


def long_tailed_size(rng: random.Random, smallest: int, largest: int) -> int:
    """Log-normal around 2 KiB, clipped: many tiny files, a long tail up to `largest`."""
    return max(smallest, min(largest, int(rng.lognormvariate(math.log(2 * KiB), 1.6))))


def generate_mixed_tree(dest: Path, rng: random.Random, files: int, dirs: int, max_depth: int,
                        symlinks: int, dangling: int) -> dict:
    dir_paths = plan_directories(rng, dirs, max_depth)
    for rel in dir_paths:
        (dest / rel).mkdir(mode=0o700 if rng.random() < 0.02 else 0o755)
    # Skewed fan-out: a few directories hold many files, most hold a handful.
    weights = [min(100.0, rng.paretovariate(1.5)) for _ in dir_paths]
    extensions = [".rs", ".c", ".h", ".txt", ".json", ".md", ".py", ""]
    file_paths = []
    for i, rel_dir in enumerate(rng.choices(dir_paths, weights=weights, k=files)):
        name = f"f{i:05d}{rng.choice(extensions)}"
        rel = f"{rel_dir}/{name}" if rel_dir else name
        path = dest / rel
        write_random_file(path, long_tailed_size(rng, 1, 64 * KiB), rng)
        if i % 50 == 0:
            path.chmod(0o755)
        elif i % 97 == 0:
            path.chmod(0o600)
        file_paths.append(rel)
    for i in range(symlinks):
        link_dir = rng.choice(dir_paths)
        link = dest / link_dir / f"link{i:02d}"
        if i < dangling:
            target = f"missing-target-{i}"
        else:
            target = os.path.relpath(dest / rng.choice(file_paths), start=link.parent)
        os.symlink(target, link)
    set_deterministic_times(dest, rng)
    return {"max_depth": max_depth}


def generate_check_tree(dest: Path, rng: random.Random) -> dict:
    """About 50 small files for --check: empty and odd sizes, nesting, odd modes, symlinks."""
    (dest / "a" / "b" / "c").mkdir(parents=True)
    (dest / "empty-dir").mkdir()
    (dest / "private").mkdir(mode=0o700)
    places = ["", "a", "a/b", "a/b/c", "private"]
    for i in range(48):
        size = [0, 1, 4095, 4096, 4097, 12345][i % 6] if i < 12 else rng.randrange(1, 20 * KiB)
        write_random_file(dest / places[i % len(places)] / f"file{i:02d}", size, rng)
    write_random_file(dest / "a" / "big.bin", 300 * KiB, rng)
    (dest / "a" / "file01").chmod(0o640)
    (dest / "a" / "b" / "file02").chmod(0o755)
    os.symlink("b/file02", dest / "a" / "to-file")
    os.symlink("../nowhere", dest / "a" / "dangling")
    set_deterministic_times(dest, rng)
    return {}


def choose_real_tree(override: Optional[str]) -> Path:
    candidates = [override] if override else REAL_TREE_CANDIDATES
    for candidate in candidates:
        path = Path(candidate).expanduser()
        if path.is_dir():
            return path.resolve()
    raise SystemExit(f"copybench: no real tree found for src-tree (tried {', '.join(candidates)})")


def copy_real_tree(dest: Path, origin: Path) -> dict:
    def special_files(directory: str, names: list[str]) -> list[str]:
        skipped = []
        for name in names:
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                skipped.append(name)
        return skipped

    shutil.copytree(origin, dest, symlinks=True, ignore=special_files)
    return {"origin": str(origin)}


def set_deterministic_times(root: Path, rng: random.Random) -> None:
    """Old, distinct mtimes with nanoseconds, so that a tool that claims to preserve them and
    does not is caught. Post-order, so that setting a child's time does not touch its parent."""
    base_ns = 1_500_000_000 * 10**9
    for directory, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(directory, d))]:
            t = base_ns + rng.randrange(10**17)
            os.utime(os.path.join(directory, name), ns=(t, t), follow_symlinks=False)
        t = base_ns + rng.randrange(10**17)
        os.utime(directory, ns=(t, t))


@dataclass
class Workload:
    name: str
    description: str
    generate: Callable[[Path, random.Random], dict]
    parameters: dict = field(default_factory=dict)


def workload_catalogue(real_tree: Optional[str]) -> dict[str, Workload]:
    def flat(count: int, size: int) -> Callable[[Path, random.Random], dict]:
        return lambda dest, rng: generate_flat_directory(dest, rng, count, size)

    mixed = dict(files=50_000, dirs=3_000, max_depth=6, symlinks=24, dangling=4)
    workloads = [
        Workload("1g", "one 1 GiB file", flat(1, GiB)),
        Workload("16x64m", "16 files of 64 MiB", flat(16, 64 * MiB)),
        Workload("1024x32k", "1024 files of 32 KiB in one directory", flat(1024, 32 * KiB)),
        Workload("4096x32k", "4096 files of 32 KiB in one directory", flat(4096, 32 * KiB)),
        Workload("50k-mixed", "50,000 files of 1 B-64 KiB (log-normal) in 3,000 dirs, depth <= 6",
                 lambda dest, rng: generate_mixed_tree(dest, rng, **mixed), mixed),
        Workload("src-tree", "a copy of a real tree on this machine",
                 lambda dest, rng: copy_real_tree(dest, choose_real_tree(real_tree)),
                 {"origin": str(choose_real_tree(real_tree)) if real_tree else "auto"}),
        Workload("check", "about 50 small files for --check", generate_check_tree),
    ]
    return {w.name: w for w in workloads}


def marker_path(root: Path, name: str) -> Path:
    return root / f"src-{name}.marker.json"


def read_marker(root: Path, name: str) -> Optional[dict]:
    try:
        return json.loads(marker_path(root, name).read_text())
    except (OSError, ValueError):
        return None


def cached_workload_is_valid(root: Path, workload: Workload, marker: Optional[dict]) -> bool:
    src = root / f"src-{workload.name}"
    if marker is None or not src.is_dir():
        return False
    expected = {"workload": workload.name, "generator": GENERATOR_VERSION, "seed": SEED}
    if any(marker.get(k) != v for k, v in expected.items()):
        return False
    if workload.parameters.get("origin", "auto") not in ("auto", marker.get("origin")):
        return False
    return TreeSummary.of(scan_tree(src)).__dict__ == marker.get("summary")


def ensure_workload(root: Path, workload: Workload, trash: "Trash") -> tuple[Path, dict]:
    """Generate ROOT/src-NAME unless a matching cached copy is there. Returns (path, marker)."""
    src = root / f"src-{workload.name}"
    marker = read_marker(root, workload.name)
    if cached_workload_is_valid(root, workload, marker):
        return src, marker
    partial = root / f"src-{workload.name}.partial"
    for stale in (src, partial):
        if stale.exists() or stale.is_symlink():
            trash.move_in(stale)
    log(f"generating workload {workload.name}: {workload.description} ...")
    started = time.perf_counter()
    extra = workload.generate(partial, random.Random(f"{SEED}-{workload.name}"))
    os.rename(partial, src)
    summary = TreeSummary.of(scan_tree(src))
    marker = {"workload": workload.name, "generator": GENERATOR_VERSION, "seed": SEED,
              "description": workload.description, "summary": summary.__dict__,
              "generated": datetime.datetime.now().isoformat(timespec="seconds"), **extra}
    marker_path(root, workload.name).write_text(json.dumps(marker, indent=2) + "\n")
    os.sync()
    log(f"  {summary.describe()} in {time.perf_counter() - started:.1f} s")
    return src, marker


# --------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------

@dataclass
class Tool:
    spec: str  # as given on the command line, e.g. "ringio:readwrite"
    family: str  # "ringio", "peer" or "floor"
    executable: Optional[str]  # None when missing
    argv: Callable[[str, str], list[str]]  # (src, dst) -> argv
    install_hint: str
    preserves: str  # "none", "files" (mode and mtime of regular files only) or "all"
    self_timed: bool = False  # the tool prints its own time (floor: the copy phase only)

    @property
    def available(self) -> bool:
        return self.executable is not None


def find_executable(name: str) -> Optional[str]:
    search = os.environ.get("PATH", "") + os.pathsep + str(Path.home() / ".cargo" / "bin")
    return shutil.which(name, path=search)


def build_c_helper_if_needed(source: Path, binary: Path) -> Optional[str]:
    """cc -O2 -pthread -o BINARY SOURCE, unless BINARY is newer than SOURCE."""
    if binary.exists() and binary.stat().st_mtime >= source.stat().st_mtime:
        return str(binary)
    cc = find_executable("cc")
    if cc is None:
        return None
    command = [cc, "-O2", "-pthread", "-o", str(binary), str(source)]
    log("building: " + shlex.join(command))
    subprocess.run(command, check=True)
    return str(binary)


def floor_flags(options: str) -> list[str]:
    """floor:u+dir+read+t32 -> -u -g dir -m read -t 32"""
    flags = []
    for option in filter(None, options.split("+")):
        if option == "u":
            flags.append("-u")
        elif option in ("dir", "file"):
            flags += ["-g", option]
        elif option in ("read", "cfr"):
            flags += ["-m", option]
        elif option.startswith("t") and option[1:].isdigit():
            flags += ["-t", option[1:]]
        else:
            raise SystemExit(f"copybench: unknown floor option {option!r} (use u, dir, read, tN)")
    return flags


def resolve_tool(spec: str, ringio_path: Path) -> Tool:
    peer_hint = "bench/install-peers.sh"
    if spec in ("cp", "cp-a"):
        flag = "-a" if spec == "cp-a" else "-r"
        return Tool(spec, "peer", find_executable("cp"), lambda s, d, x=flag: ["cp", x, s, d],
                    "apt-get install coreutils", "all" if spec == "cp-a" else "none")
    if spec == "rsync":
        # Trailing slash: copy the contents of SRC into DST (which rsync creates).
        return Tool(spec, "peer", find_executable("rsync"),
                    lambda s, d: ["rsync", "-a", "--inplace", "-W", s + "/", d],
                    f"apt-get install rsync, or {peer_hint}", "all")
    if spec == "xcp":
        return Tool(spec, "peer", find_executable("xcp"), lambda s, d: ["xcp", "-r", s, d],
                    f"cargo install xcp, or {peer_hint}", "files")
    if spec in ("fcp", "cpz"):
        return Tool(spec, "peer", find_executable(spec), lambda s, d, x=spec: [x, s, d],
                    f"cargo install {spec}, or {peer_hint}", "none")
    if spec.startswith("floor"):
        name, _, options = spec.partition(":")
        if name != "floor":
            raise SystemExit(f"copybench: unknown tool {spec!r}")
        flags = floor_flags(options)
        return Tool(spec, "floor", build_c_helper_if_needed(FLOOR_SOURCE, FLOOR_BINARY),
                    lambda s, d: [str(FLOOR_BINARY), *flags, s, d],
                    f"needs cc to build {FLOOR_SOURCE}", "none", self_timed=True)
    if spec.startswith("ringio"):
        name, _, engine = spec.partition(":")
        if name not in ("ringio", "ringio-a"):
            raise SystemExit(f"copybench: unknown tool {spec!r}")
        flags = ["-a" if name == "ringio-a" else "-r"] + (["--engine", engine] if engine else [])
        executable = str(ringio_path) if os.access(ringio_path, os.X_OK) else None
        return Tool(spec, "ringio", executable,
                    lambda s, d: [str(ringio_path), "cp", *flags, s, d],
                    f"cargo build --release (looked for {ringio_path})",
                    "all" if name == "ringio-a" else "none")
    raise SystemExit(f"copybench: unknown tool {spec!r} "
                     "(known: ringio, ringio-a, ringio:ENGINE, ringio-a:ENGINE, cp, cp-a, rsync, "
                     "xcp, fcp, cpz, floor, floor:OPTIONS)")


def tool_version(tool: Tool) -> str:
    if tool.family == "floor":
        return f"bench/floor/floor.c ({' '.join(tool.argv('SRC', 'DST')[1:-2]) or 'defaults'})"
    try:
        out = subprocess.run([tool.executable, "--version"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = out.strip().splitlines()
    return lines[0].strip() if lines else "unknown"


# --------------------------------------------------------------------------------------------
# The measurement rules: trash instead of rm, cache dropping, touching memory
# --------------------------------------------------------------------------------------------

class Trash:
    """Destinations are renamed in here between runs and deleted only at the end (or when the
    disk runs short, followed by a wait for ext4's recently-deleted-inode window)."""

    def __init__(self, root: Path):
        self.dir = root / "trash"
        self.stamp = root / ".trash-emptied"
        self.dir.mkdir(parents=True, exist_ok=True)

    def move_in(self, path: Path) -> None:
        os.rename(path, self.dir / f"{time.time_ns()}-{path.name}")

    def empty(self) -> int:
        """Delete everything; returns how many inodes were freed."""
        freed = 0
        for directory, dirnames, filenames in os.walk(self.dir, topdown=False):
            for name in filenames:
                os.unlink(os.path.join(directory, name))
            for name in dirnames:  # bottom-up, so already empty; or a symlink to a directory
                path = os.path.join(directory, name)
                if os.path.islink(path):
                    os.unlink(path)
                else:
                    os.rmdir(path)
            freed += len(filenames) + len(dirnames)
        # ext4 counts a deleted inode as recent for 60 s, or 360 s while its inode table block
        # is dirty: sync so that the shorter window applies, and stamp the time after that.
        os.sync()
        self.stamp.write_text(json.dumps({"time": time.time(), "inodes": freed}))
        return freed

    def wait_for_deleted_inodes_to_age(self) -> None:
        """If many inodes were freed in the last minute (by us or an earlier invocation), wait."""
        try:
            last = json.loads(self.stamp.read_text())
        except (OSError, ValueError):
            return
        remaining = last["time"] + EXT4_RECENTLY_DELETED_SECONDS - time.time()
        if last["inodes"] >= MANY_INODES and remaining > 0:
            log(f"waiting {remaining:.0f} s: {last['inodes']:,} inodes were deleted recently, "
                "and ext4 (no journal) scans past them on every create for about a minute")
            time.sleep(remaining)

    def make_room(self, root: Path, needed_bytes: int) -> None:
        if shutil.disk_usage(root).free >= needed_bytes + 2 * GiB:
            return
        log("disk is getting full: emptying the trash between runs")
        self.empty()
        self.wait_for_deleted_inodes_to_age()


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def touch_and_free_memory(nbytes: int) -> None:
    """Fault in nbytes of fresh anonymous memory, one write per page, and give it back, so the
    copy that follows gets pages the host has backed again."""
    if nbytes <= 0:
        return
    pages = nbytes // PAGE_SIZE
    region = mmap.mmap(-1, pages * PAGE_SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region[::PAGE_SIZE] = b"\x01" * pages
    region.close()


def warm_page_cache(paths: list[str]) -> None:
    """Read every source file, so that a warm run really starts warm. Needed before each run:
    on these VMs DAMON pages out memory left idle for about 30 s, page cache included, and a
    source tree measurably starts to drop out of the cache within 10-20 s."""
    buffer = bytearray(MiB)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buffer):
                pass


def memory_to_touch(summary: TreeSummary, override_mib: Optional[int]) -> int:
    if override_mib is not None:
        return override_mib * MiB
    return max(256 * MiB, min(GiB, summary.bytes + 128 * MiB))


# --------------------------------------------------------------------------------------------
# Running and verifying one copy
# --------------------------------------------------------------------------------------------

@dataclass
class RunResult:
    tool: str
    run: int
    seconds: float  # what is ranked: wall time, or the tool's own time when self_timed
    wall_seconds: float
    user_seconds: float
    sys_seconds: float
    maxrss_kib: int
    exit_status: int
    verified: bool = False
    problems: list[str] = field(default_factory=list)
    stderr_tail: str = ""


def parse_floor_seconds(stdout: str) -> Optional[float]:
    for line in stdout.splitlines():
        if line.startswith("floor:") and line.endswith(" s"):
            return float(line.rsplit(",", 1)[1].split()[0])
    return None


def parse_runstat_line(text: str) -> dict[str, float]:
    return {key: float(value) for key, value in
            (item.split("=", 1) for item in text.split())}


def time_one_copy(tool: Tool, src: Path, dst: Path, logs: Path, run: int) -> RunResult:
    """Run the tool under runstat (which times it and collects its rusage), with stdout and
    stderr going to files opened beforehand."""
    argv = tool.argv(str(src), str(dst))
    out_path, err_path = logs / "last-run.out", logs / "last-run.err"
    stat_path = logs / "last-run.stat"
    runstat = [str(RUNSTAT_BINARY), str(stat_path), tool.executable, *argv]
    out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    actions = [(os.POSIX_SPAWN_DUP2, null_fd, 0), (os.POSIX_SPAWN_DUP2, out_fd, 1),
               (os.POSIX_SPAWN_DUP2, err_fd, 2)]
    try:
        started = time.perf_counter()
        pid = os.posix_spawn(runstat[0], runstat, os.environ, file_actions=actions)
        os.waitpid(pid, 0)
        wall_with_helper = time.perf_counter() - started
    finally:
        for fd in (out_fd, err_fd, null_fd):
            os.close(fd)
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    try:
        measured = parse_runstat_line(stat_path.read_text())
    except (OSError, ValueError):
        measured = {"wall_s": wall_with_helper, "user_s": 0.0, "sys_s": 0.0, "maxrss_kib": 0,
                    "exit": 255}
    wall = measured["wall_s"]
    seconds = (parse_floor_seconds(stdout) or wall) if tool.self_timed else wall
    return RunResult(tool.spec, run, seconds, wall, measured["user_s"], measured["sys_s"],
                     int(measured["maxrss_kib"]), int(measured["exit"]),
                     stderr_tail="\n".join(stderr.strip().splitlines()[-5:]))


def content_digest(path: str, evict: bool = False) -> bytes:
    """BLAKE2b of a file's content. With evict, its (clean) pages are dropped from the page cache
    afterwards, so that finished copies do not pile up in memory run after run."""
    digest = hashlib.blake2b(digest_size=16)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        while block := os.read(fd, MiB):
            digest.update(block)
        if evict:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return digest.digest()


def source_digests(src: Path, src_nodes: dict[str, Node]) -> dict[str, bytes]:
    """Digests of every source file; reading them also warms the page cache."""
    return {rel: content_digest(str(src / rel)) for rel, node in src_nodes.items()
            if node.kind == "file"}


def verify_copy(src_nodes: dict[str, Node], src_digests: dict[str, bytes], dst: Path,
                preserves: str) -> list[str]:
    """Names, types, sizes, contents and link targets; mode and mtime where the tool claims them.
    Returns the problems found (empty: a faithful copy). Call after sync: the copy's pages are
    evicted as they are checked, which only works for pages already written back."""
    if not dst.is_dir() or dst.is_symlink():
        return [f"{dst} was not created as a directory"]
    dst_nodes = scan_tree(dst)
    problems = [f"missing: {p}" for p in sorted(src_nodes.keys() - dst_nodes.keys())]
    problems += [f"unexpected: {p}" for p in sorted(dst_nodes.keys() - src_nodes.keys())]
    for rel in sorted(src_nodes.keys() & dst_nodes.keys()):
        want, got = src_nodes[rel], dst_nodes[rel]
        if want.kind != got.kind:
            problems.append(f"{rel}: is a {got.kind}, expected a {want.kind}")
            continue
        if want.kind == "file":
            if want.size != got.size:
                problems.append(f"{rel}: size {got.size}, expected {want.size}")
            elif content_digest(str(dst / rel), evict=True) != src_digests[rel]:
                problems.append(f"{rel}: content differs")
        if want.kind == "symlink" and want.target != got.target:
            problems.append(f"{rel}: link to {got.target!r}, expected {want.target!r}")
        checks_metadata = preserves == "all" or (preserves == "files" and want.kind == "file")
        if checks_metadata:
            if want.kind != "symlink" and want.mode != got.mode:
                problems.append(f"{rel}: mode {got.mode:o}, expected {want.mode:o}")
            if want.mtime_ns != got.mtime_ns:
                problems.append(f"{rel}: mtime {got.mtime_ns}, expected {want.mtime_ns}")
    return problems


def first_problems(problems: list[str], keep: int = 20) -> list[str]:
    if len(problems) <= keep:
        return problems
    return problems[:keep] + [f"... and {len(problems) - keep:,} more"]


# --------------------------------------------------------------------------------------------
# The benchmark loop
# --------------------------------------------------------------------------------------------

def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def rotated(items: list, by: int) -> list:
    by %= len(items)
    return items[by:] + items[:by]


def benchmark_workload(workload: Workload, tools: list[Tool], args, trash: Trash) -> dict:
    src, marker = ensure_workload(args.root, workload, trash)
    src_nodes = scan_tree(src)
    summary = TreeSummary.of(src_nodes)
    dst_parent = args.root / "dst"
    dst = dst_parent / "copy"
    dst_parent.mkdir(exist_ok=True)
    logs = args.root / "logs"
    logs.mkdir(exist_ok=True)
    touch_bytes = memory_to_touch(summary, args.touch_mib)
    log(f"== {workload.name}: {summary.describe()}; {'cold' if args.cold else 'warm'} cache; "
        f"{plural(args.runs, 'run')}; touching {touch_bytes // MiB} MiB before each")
    src_digests = source_digests(src, src_nodes)
    src_files = [str(src / rel) for rel in src_digests]

    results: dict[str, list[RunResult]] = {t.spec: [] for t in tools}
    for run in range(1, args.runs + 1):
        for tool in rotated(tools, run - 1):
            if dst.exists() or dst.is_symlink():
                trash.move_in(dst)
            trash.make_room(args.root, summary.bytes + summary.bytes // 8 + 256 * MiB)
            os.sync()
            if args.cold:
                drop_caches()
            else:
                warm_page_cache(src_files)
            touch_and_free_memory(touch_bytes)
            result = time_one_copy(tool, src, dst, logs, run)
            os.sync()
            if result.exit_status != 0:
                result.problems.append(f"exit status {result.exit_status}: {result.stderr_tail}")
            result.problems += first_problems(verify_copy(src_nodes, src_digests, dst,
                                                          tool.preserves))
            result.verified = not result.problems
            results[tool.spec].append(result)
            verdict = "ok" if result.verified else "FAILED: " + "; ".join(result.problems[:3])
            log(f"  run {run}/{args.runs} {tool.spec:<16} {result.seconds:8.3f} s  {verdict}")
    if dst.exists():
        trash.move_in(dst)
    return {"marker": marker, "summary": summary, "results": results}


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------

@dataclass
class ToolStats:
    spec: str
    family: str
    median: float
    minimum: float
    maximum: float
    stddev: float
    peak_rss_mib: float
    user: float
    sys: float
    verified_runs: int
    runs: int

    @property
    def verified(self) -> bool:
        return self.runs > 0 and self.verified_runs == self.runs


def summarize(tool: Tool, runs: list[RunResult]) -> ToolStats:
    seconds = [r.seconds for r in runs]
    return ToolStats(
        spec=tool.spec, family=tool.family, median=statistics.median(seconds),
        minimum=min(seconds), maximum=max(seconds),
        stddev=statistics.stdev(seconds) if len(seconds) > 1 else 0.0,
        peak_rss_mib=max(r.maxrss_kib for r in runs) / KiB,
        user=statistics.median(r.user_seconds for r in runs),
        sys=statistics.median(r.sys_seconds for r in runs),
        verified_runs=sum(r.verified for r in runs), runs=len(runs))


def ratio(value: float, reference: Optional[float]) -> str:
    return f"{value / reference:.2f}x" if reference else "-"


def markdown_table(workload: Workload, outcome: dict, tools: list[Tool], cold: bool) -> str:
    summary: TreeSummary = outcome["summary"]
    stats = [summarize(t, outcome["results"][t.spec]) for t in tools]
    ranked_peers = [s for s in stats if s.family == "peer" and s.verified]
    best_peer = min(ranked_peers, key=lambda s: s.median, default=None)
    cp = next((s for s in stats if s.spec == "cp" and s.verified), None)
    origin = outcome["marker"].get("origin")
    lines = [
        f"### {workload.name}: {summary.describe()}"
        + (f" (copy of {origin})" if origin else ""),
        "",
        f"{'Cold' if cold else 'Warm'} cache, {plural(stats[0].runs if stats else 0, 'run')} "
        f"per tool, round-robin. Best peer: {best_peer.spec if best_peer else '-'}.",
        "",
        "| tool | median s | min s | max s | stddev s | MiB/s | files/s | peak RSS MiB "
        "| user s | sys s | vs best peer | vs cp | verified |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in sorted(stats, key=lambda s: (not s.verified, s.median)):
        ranked = s.verified
        lines.append(
            f"| {s.spec} | {s.median:.3f} | {s.minimum:.3f} | {s.maximum:.3f} | {s.stddev:.3f} "
            f"| {summary.bytes / MiB / s.median:,.0f} | {summary.files / s.median:,.0f} "
            f"| {s.peak_rss_mib:.1f} | {s.user:.3f} | {s.sys:.3f} "
            f"| {ratio(s.median, best_peer.median) if ranked and best_peer else '-'} "
            f"| {ratio(s.median, cp.median) if ranked and cp else '-'} "
            f"| {'yes' if ranked else f'FAILED ({s.runs - s.verified_runs}/{s.runs} runs)'} |")
    lines += [
        "",
        "Times are whole-process wall clock (median); floor reports only its timed copy phase "
        "(its tree was walked beforehand). Ratios are time ratios: below 1 is faster. "
        "Peers are the tools other than ringio and floor; a FAILED tool is not ranked.",
    ]
    return "\n".join(lines)


def read_first_line_with(path: str, prefix: str) -> Optional[str]:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def mount_of(path: Path) -> dict:
    real = os.path.realpath(path)
    best = {}
    with open("/proc/mounts") as f:
        for line in f:
            device, mountpoint, fstype, options = line.split()[:4]
            mountpoint = mountpoint.replace("\\040", " ")
            inside = real == mountpoint or real.startswith(mountpoint.rstrip("/") + "/")
            if inside and len(mountpoint) >= len(best.get("mountpoint", "")):
                best = {"device": device, "mountpoint": mountpoint, "fstype": fstype,
                        "options": options}
    disk = os.path.basename(best.get("device", ""))
    rotational = Path(f"/sys/block/{disk}/queue/rotational")
    if rotational.exists():
        best["rotational"] = rotational.read_text().strip()
    return best


def damon_reclaim_status() -> Optional[str]:
    """DAMON schemes that page memory out (they evict idle page cache, so they cool 'warm'
    sources); None when there are none."""
    schemes = []
    for kdamond in sorted(Path("/sys/kernel/mm/damon/admin/kdamonds").glob("[0-9]*")):
        try:
            state = (kdamond / "state").read_text().strip()
            for scheme in sorted(kdamond.glob("contexts/*/schemes/[0-9]*")):
                action = (scheme / "action").read_text().strip()
                context = scheme.parent.parent
                aggregation_us = int((context / "monitoring_attrs/intervals/aggr_us").read_text())
                min_age = int((scheme / "access_pattern/age/min").read_text())
                schemes.append(f"kdamond {kdamond.name} {state}: {action} of memory idle for "
                               f">= {min_age * aggregation_us / 1e6:g} s")
        except (OSError, ValueError):
            continue
    return "; ".join(schemes) or None


def machine_info(root: Path) -> dict:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        cpu = next((l.split(":", 1)[1].strip() for l in lscpu.splitlines()
                    if l.startswith("Model name:")), None)
    except OSError:
        cpu = None
    return {
        "cpu": cpu or read_first_line_with("/proc/cpuinfo", "model name"),
        "nproc": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "memory": read_first_line_with("/proc/meminfo", "MemTotal"),
        "filesystem": mount_of(root),
        "damon": damon_reclaim_status(),
        "python": platform.python_version(),
    }


def describe_machine(info: dict) -> str:
    fs = info["filesystem"]
    memory_kib = (info["memory"] or "0 kB").split()[0]
    return (f"Machine: {info['cpu']}, {info['nproc']} CPUs, "
            f"{format_bytes(int(memory_kib) * KiB)} RAM, "
            f"kernel {info['kernel']}; {fs.get('fstype')} on {fs.get('device')} "
            f"({fs.get('options')}), rotational={fs.get('rotational', '?')}"
            + (f"; DAMON: {info['damon']}" if info.get("damon") else ""))


def run_record(r: RunResult) -> dict:
    return {k: v for k, v in r.__dict__.items() if k != "tool"}


def write_json(path: Path, args, info: dict, tools: list[Tool], outcomes: dict) -> None:
    document = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "cache": "cold" if args.cold else "warm",
        "runs": args.runs,
        "machine": info,
        "tools": {t.spec: {"argv": t.argv("SRC", "DST"), "executable": t.executable,
                           "version": tool_version(t), "preserves": t.preserves,
                           "self_timed": t.self_timed} for t in tools},
        "workloads": {
            name: {"marker": o["marker"], "summary": o["summary"].__dict__,
                   "runs": {spec: [run_record(r) for r in runs]
                            for spec, runs in o["results"].items()}}
            for name, o in outcomes.items()},
    }
    path.write_text(json.dumps(document, indent=2) + "\n")


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

def parse_arguments(argv: list[str]):
    p = argparse.ArgumentParser(
        description="Benchmark ringio against other tree copiers, side by side, verified.",
        epilog="Tools: ringio (cp -r), ringio-a (cp -a), ringio:ENGINE, ringio-a:ENGINE, cp, cp-a, "
               "rsync, xcp, fcp, cpz, floor, floor:OPTIONS (OPTIONS joined by '+': u = unshare "
               "the fd table, dir = threads take whole directories, read = read/write instead "
               "of copy_file_range, tN = N threads; e.g. floor:u+dir+t32).")
    p.add_argument("--workload", action="append", default=[],
                   help="1g, 16x64m, 1024x32k, 4096x32k, 50k-mixed, src-tree, check "
                        "(repeatable)")
    p.add_argument("--tools", default=DEFAULT_TOOLS, help=f"comma list [{DEFAULT_TOOLS}]")
    p.add_argument("--runs", type=int, default=None, help="timed runs per tool [5; 2 with --check]")
    p.add_argument("--cold", action="store_true",
                   help="drop the page cache before every run (needs root)")
    p.add_argument("--json", type=Path, help="write every run and the machine description here")
    p.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                   help=f"where sources, copies and trash live [{DEFAULT_ROOT}]")
    p.add_argument("--ringio", type=Path, default=DEFAULT_RINGIO,
                   help=f"the ringio binary [{DEFAULT_RINGIO}]")
    p.add_argument("--src-tree", help="the real tree to copy for the src-tree workload "
                                      f"[first of {', '.join(REAL_TREE_CANDIDATES)}]")
    p.add_argument("--touch-mib", type=int, default=None,
                   help="MiB of memory to touch and free before each run "
                        "[workload size + 128, within 256..1024]")
    p.add_argument("--check", action="store_true",
                   help="quick self-test: the `check` workload, 2 runs, through the tools "
                        "(by default every known tool that is available)")
    args = p.parse_args(argv)
    if args.check:
        args.workload = args.workload or ["check"]
        args.runs = args.runs or 2
    args.runs = args.runs or 5
    if not args.workload:
        p.error("give at least one --workload (or --check)")
    if args.cold and os.geteuid() != 0:
        p.error("--cold needs root to write /proc/sys/vm/drop_caches")
    args.root = args.root.resolve()
    return args


def main(argv: list[str]) -> int:
    args = parse_arguments(argv)
    catalogue = workload_catalogue(args.src_tree)
    unknown = [w for w in args.workload if w not in catalogue]
    if unknown:
        raise SystemExit(f"copybench: unknown workload {', '.join(unknown)} "
                         f"(known: {', '.join(catalogue)})")
    tools = [resolve_tool(spec.strip(), args.ringio) for spec in args.tools.split(",")
             if spec.strip()]
    for tool in tools:
        if not tool.available:
            log(f"{tool.spec}: skipped (install with {tool.install_hint})")
    tools = [t for t in tools if t.available]
    if not tools:
        raise SystemExit("copybench: none of the tools is available")
    if build_c_helper_if_needed(RUNSTAT_SOURCE, RUNSTAT_BINARY) is None:
        raise SystemExit(f"copybench: cannot build {RUNSTAT_SOURCE} (no cc)")
    for tool in tools:
        log(f"{tool.spec:<16} {shlex.join(tool.argv('SRC', 'DST'))}")

    args.root.mkdir(parents=True, exist_ok=True)
    trash = Trash(args.root)
    info = machine_info(args.root)
    trash.wait_for_deleted_inodes_to_age()
    outcomes = {}
    try:
        for name in args.workload:
            outcomes[name] = benchmark_workload(catalogue[name], tools, args, trash)
    finally:
        freed = trash.empty()
        log(f"trash emptied ({freed:,} inodes)")

    print(f"## Copy benchmark, {datetime.date.today().isoformat()}\n")
    print(f"Command: `{shlex.join(['python3', *sys.argv])}`\n")
    print(describe_machine(info) + "\n")
    for name, outcome in outcomes.items():
        print(markdown_table(catalogue[name], outcome, tools, args.cold) + "\n")
    if args.json:
        write_json(args.json, args, info, tools, outcomes)
        log(f"wrote {args.json}")
    all_verified = all(r.verified for o in outcomes.values()
                       for runs in o["results"].values() for r in runs)
    return 0 if all_verified else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
