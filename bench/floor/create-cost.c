/*
 * create-cost — what naming a new file atomically costs, per file.
 *
 * A new file can be made under its final name at once (what cp does:
 * openat(dir, name, O_CREAT|O_EXCL)), or without a name and linked once it is
 * complete (what ringio sync does where nothing is replaced, so that a run
 * killed midway never leaves a partial file under a final name:
 * openat(dir, ".", O_TMPFILE), then linkat(fd, "", dir, name, AT_EMPTY_PATH)).
 * This program times both ways on the same filesystem, the same work around
 * them: each file is created, written with SIZE bytes, given its times with
 * futimens, named (the second way) and closed. The two ways alternate, ROUNDS
 * rounds of N files each, every round into a fresh subdirectory of DIR, and
 * nothing is deleted (on ext4 a delete slows later creates for minutes): remove
 * DIR afterwards.
 *
 * Build: cc -O2 -o create-cost create-cost.c   (or: make)
 * Usage: create-cost DIR [N [SIZE [ROUNDS]]]   (defaults: 2048 files of 32768
 *        bytes, 3 rounds)
 * Prints one line per round and way (microseconds per file), then the median
 * of each way and their ratio. Exits 1 with the path and the reason when a call
 * fails, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 101

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void fail(const char *what, const char *dir, const char *name)
{
	fprintf(stderr, "create-cost: %s '%s/%s': %s\n", what, dir, name, strerror(errno));
	exit(1);
}

/* Creates, writes, times, names and closes n files in a new directory `path`;
 * returns the microseconds per file. */
static double one_round(const char *path, int unnamed, long n, const char *buf, size_t size)
{
	static const struct timespec times[2] = {{1600000000, 0}, {1600000000, 0}};
	char name[32];
	if (mkdir(path, 0700) != 0)
		fail("cannot make", path, "");
	int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		fail("cannot open", path, "");
	double t0 = now();
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%ld", i);
		int fd = unnamed ? openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644)
				 : openat(dir, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			fail("cannot create", path, name);
		if (pwrite(fd, buf, size, 0) != (ssize_t)size)
			fail("cannot write", path, name);
		if (futimens(fd, times) != 0)
			fail("cannot set the times of", path, name);
		if (unnamed && linkat(fd, "", dir, name, AT_EMPTY_PATH) != 0)
			fail("cannot link", path, name);
		if (close(fd) != 0)
			fail("cannot close", path, name);
	}
	double us = (now() - t0) / n * 1e6;
	close(dir);
	return us;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static long number(const char *arg, long least, long most)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || *end || v < least || v > most) {
		fprintf(stderr, "create-cost: '%s' is not a number from %ld to %ld\n", arg, least, most);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 5) {
		fprintf(stderr, "usage: create-cost DIR [N [SIZE [ROUNDS]]]\n");
		return 2;
	}
	const char *root = argv[1];
	long n = argc > 2 ? number(argv[2], 1, 10000000) : 2048;
	size_t size = argc > 3 ? (size_t)number(argv[3], 0, 1 << 30) : 32768;
	int rounds = argc > 4 ? (int)number(argv[4], 1, MAX_ROUNDS) : 3;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fprintf(stderr, "create-cost: no memory for %zu bytes\n", size);
		return 1;
	}
	memset(buf, 7, size);
	if (mkdir(root, 0700) != 0 && errno != EEXIST)
		fail("cannot make", root, "");
	double named[MAX_ROUNDS], unnamed[MAX_ROUNDS];
	char path[4096];
	for (int r = 0; r < rounds; r++) {
		for (int way = 0; way < 2; way++) {
			snprintf(path, sizeof path, "%s/%s-%d-%ld", root, way ? "unnamed" : "named", r,
				 (long)getpid());
			double us = one_round(path, way, n, buf, size);
			(way ? unnamed : named)[r] = us;
			printf("round %d %-28s %.1f us/file\n", r + 1,
			       way ? "O_TMPFILE + linkat:" : "O_CREAT|O_EXCL by name:", us);
		}
	}
	qsort(named, rounds, sizeof *named, by_value);
	qsort(unnamed, rounds, sizeof *unnamed, by_value);
	double a = named[rounds / 2], b = unnamed[rounds / 2];
	printf("median: by name %.1f us/file, unnamed and linked %.1f us/file (%.2fx, +%.1f us)\n",
	       a, b, b / a, b - a);
	free(buf);
	return 0;
}
