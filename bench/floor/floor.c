/*
 * floor — the syscall floor for copying a tree of small files.
 *
 * Phase 1 (untimed) walks SRC and records every directory, regular file and
 * symlink (relative path, size, mode, link target). Phase 2 (timed) does only
 * the calls a copy cannot avoid:
 *
 *   mkdirat for every directory (serially, parents first), then on T threads:
 *   openat(src, O_RDONLY); openat(dst, O_WRONLY|O_CREAT|O_EXCL);
 *   copy_file_range until done (read/write on EXDEV/ENOSYS/EINVAL/EOPNOTSUPP);
 *   close; close — and symlinkat for symlinks.
 *
 * No per-file stat, no metadata. This is a lower bound for what a real copier
 * (which must also walk, stat and usually preserve metadata) can reach.
 *
 * Build: cc -O2 -pthread -o floor floor.c
 * Usage: floor [-t THREADS] [-u] [-m cfr|read] [-g file|dir] SRC DST
 *   -t N     worker threads (default: online CPUs)
 *   -u       each worker calls unshare(CLONE_FILES) first (private fd table)
 *   -m read  move data with read/write through a 128 KiB buffer
 *   -g dir   workers take whole directories (opening entries relative to
 *            directory fds) instead of single files by relative path
 * DST must not exist; its parent must. Prints "floor: N files, X.XXX s, Y.YYY s CPU"
 * where both times cover phase 2 only. Exit status 1 if any entry failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define RW_BUFFER_SIZE (128 * 1024)

enum entry_kind { ENTRY_FILE, ENTRY_SYMLINK };

struct entry {
    char *path;          /* relative to the tree root */
    const char *name;    /* last component, points into path */
    char *link_target;   /* symlinks only */
    off_t size;
    mode_t mode;
    enum entry_kind kind;
};

struct directory {
    char *path;          /* "." for the root */
    mode_t mode;
    size_t first_entry;  /* entries of this directory are contiguous */
    size_t entry_count;
};

struct tree {
    struct directory *dirs;
    size_t dir_count, dir_capacity;
    struct entry *entries;
    size_t entry_count, entry_capacity;
    size_t file_count;
};

struct options {
    int threads;
    int unshare_files;
    int use_read_write;
    int by_directory;
    const char *src;
    const char *dst;
};

struct shared_state {
    const struct tree *tree;
    const struct options *opts;
    int src_root_fd;
    int dst_root_fd;
    atomic_size_t next_job;
    atomic_int failures;
};

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        perror("floor: realloc");
        exit(2);
    }
    return p;
}

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *s;
    if (strcmp(dir, ".") == 0) {
        s = xrealloc(NULL, b + 1);
        memcpy(s, name, b + 1);
        return s;
    }
    s = xrealloc(NULL, a + b + 2);
    memcpy(s, dir, a);
    s[a] = '/';
    memcpy(s + a + 1, name, b + 1);
    return s;
}

static size_t add_directory(struct tree *t, char *path, mode_t mode)
{
    if (t->dir_count == t->dir_capacity) {
        t->dir_capacity = t->dir_capacity ? t->dir_capacity * 2 : 256;
        t->dirs = xrealloc(t->dirs, t->dir_capacity * sizeof *t->dirs);
    }
    t->dirs[t->dir_count] = (struct directory){ .path = path, .mode = mode };
    return t->dir_count++;
}

static void add_entry(struct tree *t, struct entry e)
{
    if (t->entry_count == t->entry_capacity) {
        t->entry_capacity = t->entry_capacity ? t->entry_capacity * 2 : 4096;
        t->entries = xrealloc(t->entries, t->entry_capacity * sizeof *t->entries);
    }
    t->entries[t->entry_count++] = e;
    if (e.kind == ENTRY_FILE)
        t->file_count++;
}

/* Phase 1: record one directory's files and symlinks (contiguously), then recurse. */
static void walk_directory(struct tree *t, int src_root_fd, size_t dir_index)
{
    const char *dir_path = t->dirs[dir_index].path;
    int fd = openat(src_root_fd, dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "floor: cannot open '%s': %s\n", dir_path, strerror(errno));
        exit(2);
    }
    DIR *d = fdopendir(fd);
    char **subdirs = NULL;
    mode_t *subdir_modes = NULL;
    size_t subdir_count = 0;
    struct dirent *de;

    t->dirs[dir_index].first_entry = t->entry_count;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            fprintf(stderr, "floor: cannot stat '%s/%s': %s\n", dir_path, de->d_name,
                    strerror(errno));
            exit(2);
        }
        char *path = join_path(dir_path, de->d_name);
        const char *name = path + strlen(path) - strlen(de->d_name);
        if (S_ISDIR(st.st_mode)) {
            subdirs = xrealloc(subdirs, (subdir_count + 1) * sizeof *subdirs);
            subdir_modes = xrealloc(subdir_modes, (subdir_count + 1) * sizeof *subdir_modes);
            subdirs[subdir_count] = path;
            subdir_modes[subdir_count++] = st.st_mode & 07777;
        } else if (S_ISREG(st.st_mode)) {
            add_entry(t, (struct entry){ .path = path, .name = name, .size = st.st_size,
                                         .mode = st.st_mode & 07777, .kind = ENTRY_FILE });
        } else if (S_ISLNK(st.st_mode)) {
            char *target = xrealloc(NULL, (size_t)st.st_size + 2);
            ssize_t n = readlinkat(fd, de->d_name, target, (size_t)st.st_size + 1);
            if (n < 0) {
                fprintf(stderr, "floor: cannot readlink '%s': %s\n", path, strerror(errno));
                exit(2);
            }
            target[n] = '\0';
            add_entry(t, (struct entry){ .path = path, .name = name, .link_target = target,
                                         .kind = ENTRY_SYMLINK });
        } else {
            fprintf(stderr, "floor: skipping special file '%s'\n", path);
            free(path);
        }
    }
    closedir(d);
    t->dirs[dir_index].entry_count = t->entry_count - t->dirs[dir_index].first_entry;

    for (size_t i = 0; i < subdir_count; i++) {
        size_t child = add_directory(t, subdirs[i], subdir_modes[i]);
        walk_directory(t, src_root_fd, child);
    }
    free(subdirs);
    free(subdir_modes);
}

static int copy_with_read_write(int in, int out, char *buf)
{
    for (;;) {
        ssize_t n = read(in, buf, RW_BUFFER_SIZE);
        if (n == 0)
            return 0;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                return -1;
            }
            done += w;
        }
    }
}

static int copy_with_copy_file_range(int in, int out, off_t size, char *buf)
{
    off_t copied = 0;
    while (copied < size) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)(size - copied), 0);
        if (n > 0) {
            copied += n;
            continue;
        }
        if (n == 0)
            return 0; /* source shrank */
        if (errno == EINTR)
            continue;
        if (copied == 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
                            errno == EOPNOTSUPP))
            return copy_with_read_write(in, out, buf);
        return -1;
    }
    return 0;
}

static void report_failure(struct shared_state *s, const char *op, const char *path)
{
    fprintf(stderr, "floor: cannot %s '%s': %s\n", op, path, strerror(errno));
    atomic_fetch_add(&s->failures, 1);
}

/* The per-entry work. src_dir/dst_dir are either the tree roots (name = relative path)
 * or the entry's own directory fds (name = last component). */
static void copy_entry(struct shared_state *s, const struct entry *e, int src_dir, int dst_dir,
                       const char *name, char *buf)
{
    if (e->kind == ENTRY_SYMLINK) {
        if (symlinkat(e->link_target, dst_dir, name) != 0)
            report_failure(s, "create symlink", e->path);
        return;
    }
    int in = openat(src_dir, name, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        report_failure(s, "open", e->path);
        return;
    }
    int out = openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, e->mode);
    if (out < 0) {
        report_failure(s, "create", e->path);
        close(in);
        return;
    }
    int rc = 0;
    if (e->size > 0)
        rc = s->opts->use_read_write ? copy_with_read_write(in, out, buf)
                                     : copy_with_copy_file_range(in, out, e->size, buf);
    if (rc != 0)
        report_failure(s, "copy", e->path);
    close(in);
    if (close(out) != 0)
        report_failure(s, "close", e->path);
}

static void copy_one_directory(struct shared_state *s, const struct directory *d, char *buf)
{
    if (d->entry_count == 0)
        return;
    int src_dir = openat(s->src_root_fd, d->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int dst_dir = openat(s->dst_root_fd, d->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (src_dir < 0 || dst_dir < 0) {
        report_failure(s, "open directory", d->path);
    } else {
        for (size_t i = 0; i < d->entry_count; i++) {
            const struct entry *e = &s->tree->entries[d->first_entry + i];
            copy_entry(s, e, src_dir, dst_dir, e->name, buf);
        }
    }
    if (src_dir >= 0)
        close(src_dir);
    if (dst_dir >= 0)
        close(dst_dir);
}

static void *worker(void *arg)
{
    struct shared_state *s = arg;
    char *buf = s->opts->use_read_write ? xrealloc(NULL, RW_BUFFER_SIZE) : NULL;
    if (s->opts->unshare_files && unshare(CLONE_FILES) != 0) {
        perror("floor: unshare(CLONE_FILES)");
        exit(2);
    }
    if (s->opts->by_directory) {
        size_t i;
        while ((i = atomic_fetch_add(&s->next_job, 1)) < s->tree->dir_count)
            copy_one_directory(s, &s->tree->dirs[i], buf);
    } else {
        size_t i;
        while ((i = atomic_fetch_add(&s->next_job, 1)) < s->tree->entry_count) {
            const struct entry *e = &s->tree->entries[i];
            copy_entry(s, e, s->src_root_fd, s->dst_root_fd, e->path, buf);
        }
    }
    free(buf);
    return NULL;
}

/* Directories were recorded parents first, so creating them in order is safe. */
static int create_directories(const struct tree *t, const char *dst, int *dst_root_fd)
{
    if (mkdir(dst, t->dirs[0].mode | 0700) != 0) {
        fprintf(stderr, "floor: cannot create '%s': %s\n", dst, strerror(errno));
        return -1;
    }
    *dst_root_fd = open(dst, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dst_root_fd < 0) {
        fprintf(stderr, "floor: cannot open '%s': %s\n", dst, strerror(errno));
        return -1;
    }
    for (size_t i = 1; i < t->dir_count; i++) {
        if (mkdirat(*dst_root_fd, t->dirs[i].path, t->dirs[i].mode | 0700) != 0) {
            fprintf(stderr, "floor: cannot create directory '%s': %s\n", t->dirs[i].path,
                    strerror(errno));
            return -1;
        }
    }
    return 0;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time (user + system) of every thread of the process so far. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void usage(void)
{
    fprintf(stderr, "usage: floor [-t THREADS] [-u] [-m cfr|read] [-g file|dir] SRC DST\n");
    exit(2);
}

static struct options parse_options(int argc, char **argv)
{
    struct options o = { .threads = (int)sysconf(_SC_NPROCESSORS_ONLN) };
    int c;
    while ((c = getopt(argc, argv, "t:um:g:h")) != -1) {
        switch (c) {
        case 't':
            o.threads = atoi(optarg);
            break;
        case 'u':
            o.unshare_files = 1;
            break;
        case 'm':
            if (strcmp(optarg, "read") == 0)
                o.use_read_write = 1;
            else if (strcmp(optarg, "cfr") != 0)
                usage();
            break;
        case 'g':
            if (strcmp(optarg, "dir") == 0)
                o.by_directory = 1;
            else if (strcmp(optarg, "file") != 0)
                usage();
            break;
        default:
            usage();
        }
    }
    if (argc - optind != 2 || o.threads < 1)
        usage();
    o.src = argv[optind];
    o.dst = argv[optind + 1];
    return o;
}

int main(int argc, char **argv)
{
    struct options opts = parse_options(argc, argv);
    struct tree tree = { 0 };

    /* Phase 1, untimed: the pre-walk. */
    int src_root_fd = open(opts.src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat root_st;
    if (src_root_fd < 0 || fstat(src_root_fd, &root_st) != 0) {
        fprintf(stderr, "floor: cannot open '%s': %s\n", opts.src, strerror(errno));
        return 2;
    }
    char *root_path = xrealloc(NULL, 2);
    strcpy(root_path, ".");
    add_directory(&tree, root_path, root_st.st_mode & 07777);
    walk_directory(&tree, src_root_fd, 0);

    /* Phase 2, timed: directories, then the files on worker threads. */
    struct shared_state state = { .tree = &tree, .opts = &opts, .src_root_fd = src_root_fd };
    double start = now_seconds(), start_cpu = cpu_seconds();
    if (create_directories(&tree, opts.dst, &state.dst_root_fd) != 0)
        return 1;
    pthread_t *threads = xrealloc(NULL, (size_t)opts.threads * sizeof *threads);
    for (int i = 0; i < opts.threads; i++) {
        if (pthread_create(&threads[i], NULL, worker, &state) != 0) {
            fprintf(stderr, "floor: cannot start thread %d\n", i);
            return 2;
        }
    }
    for (int i = 0; i < opts.threads; i++)
        pthread_join(threads[i], NULL);
    double elapsed = now_seconds() - start, cpu = cpu_seconds() - start_cpu;

    printf("floor: %zu files, %.3f s, %.3f s CPU\n", tree.file_count, elapsed, cpu);
    fprintf(stderr, "floor: %zu dirs, %zu symlinks, %d threads, %s, %s%s\n", tree.dir_count,
            tree.entry_count - tree.file_count, opts.threads,
            opts.by_directory ? "whole directories" : "single files",
            opts.use_read_write ? "read/write 128 KiB" : "copy_file_range",
            opts.unshare_files ? ", unshare(CLONE_FILES)" : "");
    return atomic_load(&state.failures) ? 1 : 0;
}
