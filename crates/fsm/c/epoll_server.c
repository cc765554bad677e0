/*
 * The reference server of `ringio bench server`: the FSM protocol on one bare epoll loop in C,
 * the way a C programmer would write it by hand. No allocation per event, clients in an array
 * indexed by descriptor, level-triggered, one recv and (if replies are pending) one send per
 * readiness event. It speaks exactly what the Rust models speak (pipelining, whitespace, '?',
 * the close after 'd', backpressure past 64 KiB of unsent replies, a pause in accepting when
 * descriptors run out), so it is the reference the Rust models are held against.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Replies pending past this stop reading from the client until it drains them. */
#define HIGH_WATER (64 * 1024)
#define RECV_BUF (64 * 1024)
#define EVENTS 1024
/* How long accepting pauses after descriptors ran out. */
#define ACCEPT_PAUSE_MS 100

/* The counters of the Rust side (atomics, added to with relaxed atomic adds). */
struct ringio_c_counters {
	uint64_t *connections;
	uint64_t *requests;
	uint64_t *refused;
	uint64_t *errors;
	uint64_t *peak_replies; /* the most unsent replies of one client */
};

struct client {
	unsigned char open;
	unsigned char state; /* 'a'..'d' */
	unsigned char done;  /* the reply 'd' is queued: close once it is sent */
	uint32_t interest;   /* the events epoll watches for this descriptor */
	unsigned char *out;  /* unsent replies: out[sent..len] */
	size_t len, sent, cap;
};

static const unsigned char TABLE[4][4] = {
	{'a', 'b', 'c', 'd'},
	{'a', 'a', 'b', 'd'},
	{'a', 'a', 'c', 'd'},
	{'d', 'd', 'd', 'd'},
};

static void bump(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

/* Raises *peak to n. */
static void note_peak(uint64_t *peak, uint64_t n)
{
	uint64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
	while (n > seen &&
	       !__atomic_compare_exchange_n(peak, &seen, n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs received bytes through the state machine; returns the requests answered, or -1 when
 * the reply buffer cannot grow. */
static long feed(struct client *c, const unsigned char *in, size_t n)
{
	if (c->sent == c->len)
		c->len = c->sent = 0;
	if (c->len + n > c->cap) {
		size_t cap = c->cap ? c->cap : 256;
		while (cap < c->len + n)
			cap *= 2;
		unsigned char *out = realloc(c->out, cap);
		if (!out)
			return -1;
		c->out = out;
		c->cap = cap;
	}
	long answered = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char b = in[i], reply;
		if (b == ' ' || b == '\t' || b == '\r' || b == '\n')
			continue;
		answered++;
		if (b <= 3)
			reply = TABLE[c->state - 'a'][b];
		else if (b >= '0' && b <= '3')
			reply = TABLE[c->state - 'a'][b - '0'];
		else
			reply = '?';
		if (reply != '?')
			c->state = reply;
		c->out[c->len++] = reply;
		if (reply == 'd') {
			c->done = 1;
			break;
		}
	}
	return answered;
}

static int watch(int ep, int op, int fd, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.fd = fd};
	return epoll_ctl(ep, op, fd, &ev);
}

static void drop_client(int ep, struct client *c, int fd)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	free(c->out);
	memset(c, 0, sizeof *c);
}

/* Accepts every waiting client. Returns 1 when descriptors (or memory) ran out. */
static int accept_all(int ep, int lfd, struct client **clients, size_t *nclients,
		      const struct ringio_c_counters *k)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				if (__atomic_fetch_add(k->refused, 1, __ATOMIC_RELAXED) % 1000 == 0)
					fprintf(stderr,
						"ringio serve: accept failed (%s); pausing accepts for %d ms\n",
						strerror(errno), ACCEPT_PAUSE_MS);
				return 1;
			}
			return 0; /* EAGAIN, or a client that gave up before we accepted it */
		}
		if ((size_t)fd >= *nclients) {
			size_t n = *nclients ? *nclients : 1024;
			while (n <= (size_t)fd)
				n *= 2;
			struct client *grown = realloc(*clients, n * sizeof **clients);
			if (!grown) {
				close(fd);
				bump(k->refused, 1);
				continue;
			}
			memset(grown + *nclients, 0, (n - *nclients) * sizeof **clients);
			*clients = grown;
			*nclients = n;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (watch(ep, EPOLL_CTL_ADD, fd, EPOLLIN) < 0) {
			close(fd);
			bump(k->refused, 1);
			continue;
		}
		struct client *c = &(*clients)[fd];
		memset(c, 0, sizeof *c);
		c->open = 1;
		c->state = 'a';
		c->interest = EPOLLIN;
		bump(k->connections, 1);
	}
}

/* Serves on the listening socket `lfd` until `*stop` is true. Returns 0, or -errno when the
 * loop itself failed. Clients still connected are closed on return. */
int ringio_c_epoll_run(int lfd, const unsigned char *stop, const struct ringio_c_counters *k)
{
	int flags = fcntl(lfd, F_GETFL);
	if (flags < 0 || fcntl(lfd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -errno;
	int ret = 0;
	struct client *clients = NULL;
	size_t nclients = 0;
	struct epoll_event events[EVENTS];
	unsigned char *buf = malloc(RECV_BUF);
	if (!buf) {
		close(ep);
		return -ENOMEM;
	}
	if (watch(ep, EPOLL_CTL_ADD, lfd, EPOLLIN) < 0) {
		ret = -errno;
		goto out;
	}
	int64_t paused_until = 0;
	while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
		int n = epoll_wait(ep, events, EVENTS, 100);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		if (paused_until && now_ms() >= paused_until) {
			paused_until = 0;
			watch(ep, EPOLL_CTL_MOD, lfd, EPOLLIN);
		}
		for (int i = 0; i < n; i++) {
			int fd = events[i].data.fd;
			uint32_t ev = events[i].events;
			if (fd == lfd) {
				if (!paused_until && accept_all(ep, lfd, &clients, &nclients, k)) {
					/* It stays readable: stop watching it for a while rather than spin. */
					watch(ep, EPOLL_CTL_MOD, lfd, 0);
					paused_until = now_ms() + ACCEPT_PAUSE_MS;
				}
				continue;
			}
			if ((size_t)fd >= nclients || !clients[fd].open)
				continue;
			struct client *c = &clients[fd];
			int close_it = 0;
			long answered = 0;
			int wants_input = !c->done && c->len - c->sent < HIGH_WATER;
			if ((ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) && wants_input) {
				ssize_t r = recv(fd, buf, RECV_BUF, 0);
				if (r == 0) {
					close_it = 1;
				} else if (r > 0) {
					answered = feed(c, buf, (size_t)r);
					if (answered < 0) {
						bump(k->errors, 1);
						close_it = 1;
					} else {
						bump(k->requests, (uint64_t)answered);
						note_peak(k->peak_replies, c->len - c->sent);
					}
				} else if (errno != EAGAIN && errno != EINTR) {
					bump(k->errors, 1);
					close_it = 1;
				}
			}
			/* Replies go out as soon as they exist, not a loop turn later. */
			if (!close_it && ((ev & EPOLLOUT) || answered > 0) && c->sent < c->len) {
				ssize_t s = send(fd, c->out + c->sent, c->len - c->sent, MSG_NOSIGNAL);
				if (s >= 0) {
					c->sent += (size_t)s;
					if (c->sent == c->len)
						c->len = c->sent = 0;
				} else if (errno != EAGAIN && errno != EINTR) {
					bump(k->errors, 1);
					close_it = 1;
				}
			}
			int pending = c->sent < c->len;
			if (close_it || (c->done && !pending)) {
				drop_client(ep, c, fd);
				continue;
			}
			uint32_t want = (!c->done && c->len - c->sent < HIGH_WATER ? EPOLLIN : 0) |
					(pending ? EPOLLOUT : 0);
			if (want != c->interest) {
				if (watch(ep, EPOLL_CTL_MOD, fd, want) < 0) {
					ret = -errno;
					goto out;
				}
				c->interest = want;
			}
		}
	}
out:
	for (size_t fd = 0; fd < nclients; fd++)
		if (clients[fd].open)
			drop_client(ep, &clients[fd], (int)fd);
	free(clients);
	free(buf);
	close(ep);
	return ret;
}
