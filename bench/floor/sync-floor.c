/*
 * sync-floor — the syscall floor of a re-sync that finds nothing to do.
 *
 * An `rsync -a` style re-sync of SRC onto DST must, even when nothing changed,
 * list every directory of both trees and stat every entry of both (the quick
 * check compares type, mode, owner, size and mtime; -H adds the inode and link
 * count). With -X (the -aHAX floor) it must also list every entry's extended
 * attributes (ACLs are among them) and read each one listed. This program makes
 * exactly those calls and nothing else: it compares nothing and writes nothing.
 *
 *   per directory, per tree: openat(parent, name, O_RDONLY|O_DIRECTORY|
 *     O_NOFOLLOW|O_CLOEXEC), getdents64 until empty (64 KiB buffer), close;
 *   per entry, per tree: statx(dir, name, AT_SYMLINK_NOFOLLOW) for type, mode,
 *     nlink, uid, gid, size, mtime and inode;
 *   with -X, per entry, per tree: listxattrat(dir, name, AT_SYMLINK_NOFOLLOW)
 *     (Linux 6.13; before it llistxattr of /proc/self/fd/DIR/NAME), and a
 *     getxattrat for each attribute it names.
 *
 * The two trees are walked together, a directory pair at a time, on N threads
 * that take pairs from one shared stack; a subdirectory found on one side only
 * is walked alone. A directory is opened by the thread that lists it, relative
 * to its parent's descriptor, so a pair waiting in the stack holds no
 * descriptor of its own and the walk reaches below PATH_MAX.
 *
 * Build: cc -O2 -pthread -o sync-floor sync-floor.c   (or: make)
 * Usage: sync-floor [-j N] [-X] SRC/ DST/
 *   -j N  threads (default: the cores times 8, clamped to 16..64, as ringio
 *         sync's walk)
 *   -X    also list (and read) the extended attributes of every entry
 * Prints, on stdout, each tree's entries (counted as `find TREE | wc -l`
 * counts them: the root included) and directories, and the wall time of the
 * walk. An entry that cannot be opened, listed or stat'ed is reported on
 * stderr with its path and the reason; the walk goes on and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_listxattrat
#if defined(__x86_64__) || defined(__aarch64__) || defined(__riscv)
#define SYS_getxattrat 464
#define SYS_listxattrat 465
#endif
#endif

#define DIR_BUF (64 * 1024)
#define XATTR_LIST_BUF (64 * 1024)
#define XATTR_VALUE_BUF (64 * 1024)

/* What a no-change re-sync under -a (and -H) reads of each entry. */
#define MASK                                                                   \
    (STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_UID | STATX_GID |           \
     STATX_MTIME | STATX_SIZE | STATX_INO)

enum { SRC = 0, DST = 1 };

/* An open directory of one pair; its descriptors stay open while a child pair
 * still has to be opened relative to them. */
struct pair {
    int fd[2];          /* -1 where this side has no such directory */
    char *path;         /* relative to the roots, "." for them */
    atomic_int refs;    /* the lister's, and one per child not opened yet */
    struct pair *parent;
};

/* A child pair waiting to be opened: which sides have it. */
struct task {
    struct pair *parent;
    char *name;
    int sides;          /* bit SRC, bit DST */
};

struct counts {
    uint64_t entries[2];
    uint64_t dirs[2];
    uint64_t xattrs[2];
};

static const char *roots[2];
static int list_xattrs;
static atomic_int errors;
static atomic_int use_proc_paths; /* the kernel has no listxattrat */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct task *stack;
static size_t stack_len, stack_cap;
static size_t busy; /* pairs being listed */
static size_t idle; /* workers waiting for a pair */
static int done;

static void fail(int side, const char *dir, const char *name, const char *what,
                 int err) {
    flockfile(stderr);
    /* The operand as given, then the entry below it. */
    const char *root = roots[side];
    size_t len = strlen(root);
    const char *sep = len && root[len - 1] == '/' ? "" : "/";
    fprintf(stderr, "sync-floor: cannot %s '%s", what, root);
    if (strcmp(dir, ".") != 0) {
        fprintf(stderr, "%s%s", sep, dir);
        sep = "/";
    }
    if (name)
        fprintf(stderr, "%s%s", sep, name);
    fprintf(stderr, "': %s\n", strerror(err));
    funlockfile(stderr);
    atomic_fetch_add(&errors, 1);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "sync-floor: out of memory\n");
        exit(1);
    }
    return p;
}

static void release(struct pair *p) {
    while (p && atomic_fetch_sub(&p->refs, 1) == 1) {
        struct pair *parent = p->parent;
        for (int s = 0; s < 2; s++)
            if (p->fd[s] >= 0)
                close(p->fd[s]);
        free(p->path);
        free(p);
        p = parent;
    }
}

/* Pushes a batch of tasks; the caller has counted them in their parent. */
static void push(struct task *t, size_t n) {
    if (n == 0)
        return;
    pthread_mutex_lock(&lock);
    if (stack_len + n > stack_cap) {
        stack_cap = (stack_len + n) * 2;
        stack = realloc(stack, stack_cap * sizeof *stack);
        if (!stack) {
            fprintf(stderr, "sync-floor: out of memory\n");
            exit(1);
        }
    }
    memcpy(stack + stack_len, t, n * sizeof *t);
    stack_len += n;
    /* Wake as many idle workers as there are new pairs, no more. */
    for (size_t k = 0; k < n && k < idle; k++)
        pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
}

/* The names of one directory, "." and ".." left out, in one growing arena. */
struct names {
    char *buf;
    size_t len, cap;
    size_t count;
};

static void add_name(struct names *n, const char *name) {
    size_t l = strlen(name) + 1;
    if (n->len + l > n->cap) {
        n->cap = (n->len + l) * 2;
        n->buf = realloc(n->buf, n->cap);
        if (!n->buf) {
            fprintf(stderr, "sync-floor: out of memory\n");
            exit(1);
        }
    }
    memcpy(n->buf + n->len, name, l);
    n->len += l;
    n->count++;
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int list(int fd, struct names *n, char *buf) {
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, DIR_BUF);
        if (got < 0)
            return errno;
        if (got == 0)
            return 0;
        for (long off = 0; off < got;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            const char *s = d->d_name;
            if (s[0] == '.' && (s[1] == 0 || (s[1] == '.' && s[2] == 0)))
                continue;
            add_name(n, s);
        }
    }
}

/* Lists (and reads) the extended attributes of `name` in `dir`. */
static int xattrs(int dir, const char *name, char *list_buf, char *value_buf,
                  uint64_t *count) {
    char proc[64 + 4096];
    ssize_t len = -1;
    int proc_paths = atomic_load_explicit(&use_proc_paths, memory_order_relaxed);
#ifdef SYS_listxattrat
    if (!proc_paths) {
        len = syscall(SYS_listxattrat, dir, name, AT_SYMLINK_NOFOLLOW, list_buf,
                      (size_t)XATTR_LIST_BUF);
        if (len < 0 && errno == ENOSYS) {
            atomic_store(&use_proc_paths, 1);
            proc_paths = 1;
        }
    }
#else
    proc_paths = 1;
#endif
    if (proc_paths) {
        snprintf(proc, sizeof proc, "/proc/self/fd/%d/%s", dir, name);
        len = llistxattr(proc, list_buf, XATTR_LIST_BUF);
    }
    if (len < 0)
        return errno == ENOTSUP ? 0 : errno;
    for (ssize_t off = 0; off < len;) {
        const char *attr = list_buf + off;
        off += (ssize_t)strlen(attr) + 1;
        ssize_t got;
#ifdef SYS_getxattrat
        if (!proc_paths) {
            struct {
                uint64_t value;
                uint32_t size;
                uint32_t flags;
            } args = {(uintptr_t)value_buf, XATTR_VALUE_BUF, 0};
            got = syscall(SYS_getxattrat, dir, name, AT_SYMLINK_NOFOLLOW, attr,
                          &args, sizeof args);
        } else
#endif
            got = lgetxattr(proc, attr, value_buf, XATTR_VALUE_BUF);
        /* Removed between the list and the read: it is gone, not an error. */
        if (got < 0 && errno != ENODATA)
            return errno;
        (*count)++;
    }
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name) {
    if (strcmp(dir, ".") == 0)
        return strdup(name);
    size_t a = strlen(dir), b = strlen(name);
    char *p = xmalloc(a + b + 2);
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

struct worker_buf {
    char dir[DIR_BUF];
    char xlist[XATTR_LIST_BUF];
    char xvalue[XATTR_VALUE_BUF];
};

/* Lists both sides of an open pair, stats every entry, and pushes its
 * subdirectories, paired by name. */
static void walk_pair(struct pair *p, struct worker_buf *wb, struct counts *c) {
    struct names names[2] = {{0}};
    char **subdirs[2] = {NULL, NULL};
    size_t nsub[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        if (p->fd[s] < 0)
            continue;
        c->dirs[s]++;
        int err = list(p->fd[s], &names[s], wb->dir);
        if (err)
            fail(s, p->path, NULL, "read directory", err);
        subdirs[s] = xmalloc((names[s].count + 1) * sizeof(char *));
        const char *name = names[s].buf;
        for (size_t i = 0; i < names[s].count; i++, name += strlen(name) + 1) {
            struct statx st;
            c->entries[s]++;
            if (statx(p->fd[s], name, AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT,
                      MASK, &st) != 0) {
                fail(s, p->path, name, "stat", errno);
                continue;
            }
            if (list_xattrs) {
                err = xattrs(p->fd[s], name, wb->xlist, wb->xvalue, &c->xattrs[s]);
                if (err)
                    fail(s, p->path, name, "list extended attributes of", err);
            }
            if (S_ISDIR(st.stx_mode))
                subdirs[s][nsub[s]++] = (char *)name;
        }
    }
    /* Pair the subdirectories by name: each pair is one task. */
    for (int s = 0; s < 2; s++)
        if (nsub[s] > 1)
            qsort(subdirs[s], nsub[s], sizeof(char *), by_name);
    struct task *tasks = xmalloc((nsub[SRC] + nsub[DST] + 1) * sizeof *tasks);
    size_t n = 0, i = 0, j = 0;
    while (i < nsub[SRC] || j < nsub[DST]) {
        int cmp = i == nsub[SRC]   ? 1
                  : j == nsub[DST] ? -1
                                   : strcmp(subdirs[SRC][i], subdirs[DST][j]);
        const char *name = cmp <= 0 ? subdirs[SRC][i] : subdirs[DST][j];
        int sides = (cmp <= 0 ? 1 << SRC : 0) | (cmp >= 0 ? 1 << DST : 0);
        tasks[n++] = (struct task){p, strdup(name), sides};
        if (cmp <= 0)
            i++;
        if (cmp >= 0)
            j++;
    }
    atomic_fetch_add(&p->refs, (int)n);
    push(tasks, n);
    free(tasks);
    for (int s = 0; s < 2; s++) {
        free(subdirs[s]);
        free(names[s].buf);
    }
}

/* Opens a task's directories relative to its parent's. */
static struct pair *open_task(struct task *t) {
    struct pair *p = xmalloc(sizeof *p);
    p->path = join(t->parent->path, t->name);
    p->parent = NULL;
    atomic_init(&p->refs, 1);
    for (int s = 0; s < 2; s++) {
        p->fd[s] = -1;
        if (!(t->sides & (1 << s)))
            continue;
        p->fd[s] = openat(t->parent->fd[s], t->name,
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (p->fd[s] < 0)
            fail(s, t->parent->path, t->name, "open", errno);
    }
    release(t->parent);
    free(t->name);
    return p;
}

static void *worker(void *arg) {
    struct counts *c = arg;
    struct worker_buf *wb = xmalloc(sizeof *wb);
    pthread_mutex_lock(&lock);
    for (;;) {
        while (stack_len == 0 && !done) {
            idle++;
            pthread_cond_wait(&wake, &lock);
            idle--;
        }
        if (done)
            break;
        struct task t = stack[--stack_len];
        busy++;
        pthread_mutex_unlock(&lock);
        struct pair *p = open_task(&t);
        walk_pair(p, wb, c);
        release(p);
        pthread_mutex_lock(&lock);
        if (--busy == 0 && stack_len == 0) {
            done = 1;
            pthread_cond_broadcast(&wake);
        }
    }
    pthread_mutex_unlock(&lock);
    free(wb);
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(void) {
    fprintf(stderr, "usage: sync-floor [-j N] [-X] SRC/ DST/\n");
    exit(2);
}

int main(int argc, char **argv) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long threads = (cores > 0 ? cores : 2) * 8;
    threads = threads < 16 ? 16 : threads > 64 ? 64 : threads;
    int opt;
    while ((opt = getopt(argc, argv, "j:X")) != -1) {
        switch (opt) {
        case 'j': {
            char *end;
            threads = strtol(optarg, &end, 10);
            if (*end || threads < 1 || threads > 4096)
                usage();
            break;
        }
        case 'X':
            list_xattrs = 1;
            break;
        default:
            usage();
        }
    }
    if (argc - optind != 2)
        usage();
    roots[SRC] = argv[optind];
    roots[DST] = argv[optind + 1];

    /* Each pair in flight holds two descriptors; allow what the hard limit
     * allows. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    double start = now();
    /* The roots, as rsync takes SRC/ and DST/: their symlinks followed, both
     * stat'ed (and their attributes listed) like any entry. */
    struct pair *top = xmalloc(sizeof *top);
    top->path = strdup(".");
    top->parent = NULL;
    atomic_init(&top->refs, 1);
    struct counts rootc;
    memset(&rootc, 0, sizeof rootc);
    char *xl = list_xattrs ? xmalloc(XATTR_LIST_BUF) : NULL;
    char *xv = list_xattrs ? xmalloc(XATTR_VALUE_BUF) : NULL;
    for (int s = 0; s < 2; s++) {
        top->fd[s] = open(roots[s], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top->fd[s] < 0) {
            fail(s, ".", NULL, "open", errno);
            return 1;
        }
        struct statx st;
        if (statx(top->fd[s], "", AT_EMPTY_PATH | AT_STATX_SYNC_AS_STAT, MASK,
                  &st) != 0)
            fail(s, ".", NULL, "stat", errno);
        rootc.entries[s]++;
        if (list_xattrs) {
            int err = xattrs(top->fd[s], ".", xl, xv, &rootc.xattrs[s]);
            if (err)
                fail(s, ".", NULL, "list extended attributes of", err);
        }
    }
    free(xl);
    free(xv);

    pthread_t *tids = xmalloc(threads * sizeof *tids);
    struct counts *counts = calloc(threads, sizeof *counts);
    if (!counts)
        return 1;
    /* The roots' listing is the first pair, handed to the first worker as a
     * task whose directories are already open. */
    struct worker_buf *wb = xmalloc(sizeof *wb);
    walk_pair(top, wb, &rootc);
    free(wb);
    release(top);
    pthread_mutex_lock(&lock);
    if (stack_len == 0)
        done = 1;
    pthread_mutex_unlock(&lock);
    long started = 0;
    for (; started < threads; started++) {
        int err = pthread_create(&tids[started], NULL, worker, &counts[started]);
        if (err) {
            if (started == 0) {
                fprintf(stderr, "sync-floor: cannot start a thread: %s\n",
                        strerror(err));
                return 1;
            }
            break;
        }
    }
    for (long t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    double elapsed = now() - start;

    for (long t = 0; t < started; t++)
        for (int s = 0; s < 2; s++) {
            rootc.entries[s] += counts[t].entries[s];
            rootc.dirs[s] += counts[t].dirs[s];
            rootc.xattrs[s] += counts[t].xattrs[s];
        }
    for (int s = 0; s < 2; s++) {
        printf("%s: %llu entries, %llu directories", s == SRC ? "src" : "dst",
               (unsigned long long)rootc.entries[s],
               (unsigned long long)rootc.dirs[s]);
        if (list_xattrs)
            printf(", %llu extended attributes", (unsigned long long)rootc.xattrs[s]);
        printf("\n");
    }
    printf("walk: %.6f s on %ld threads%s\n", elapsed, started,
           list_xattrs ? (atomic_load(&use_proc_paths)
                              ? ", attributes through /proc/self/fd"
                              : ", attributes with listxattrat")
                       : "");
    free(tids);
    free(counts);
    return atomic_load(&errors) ? 1 : 0;
}
