/*
 * runstat — run a command and report its wall time, CPU time and peak RSS.
 *
 * Why not os.wait4 from Python: a child's ru_maxrss starts from the RSS of the mm it
 * replaces at exec. With posix_spawn (vfork) that is the Python parent's peak RSS, with
 * fork its current RSS — both far above a small copier's own peak. This helper is tiny,
 * so the command it forks starts from about 1 MiB and ru_maxrss is the command's own.
 *
 * Build: cc -O2 -o runstat runstat.c
 * Usage: runstat STATFILE PATH ARGV0 [ARGS...]
 * Writes one line to STATFILE:
 *   wall_s=W user_s=U sys_s=S maxrss_kib=K exit=E
 * where E is the exit status, or 128+N when killed by signal N. Exits with E.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds_of(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: runstat STATFILE PATH ARGV0 [ARGS...]\n");
        return 2;
    }
    FILE *stats = fopen(argv[1], "w");
    if (!stats) {
        fprintf(stderr, "runstat: cannot open '%s': %s\n", argv[1], strerror(errno));
        return 2;
    }

    double start = monotonic_seconds();
    pid_t pid = fork();
    if (pid < 0) {
        perror("runstat: fork");
        return 2;
    }
    if (pid == 0) {
        execv(argv[2], argv + 3);
        fprintf(stderr, "runstat: cannot execute '%s': %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int status;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) {
            perror("runstat: wait4");
            return 2;
        }
    }
    double wall = monotonic_seconds() - start;

    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    fprintf(stats, "wall_s=%.6f user_s=%.6f sys_s=%.6f maxrss_kib=%ld exit=%d\n", wall,
            seconds_of(usage.ru_utime), seconds_of(usage.ru_stime), usage.ru_maxrss, exit_code);
    fclose(stats);
    return exit_code;
}
