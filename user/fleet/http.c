// SPDX-License-Identifier: BSD-2-Clause
/*
 * libmicrohttpd runs one thread per connection (MHD_USE_THREAD_PER_
 * CONNECTION) so a ?seconds request can simply block its thread on a
 * condition variable until its window is recorded; suspend/resume would
 * need the same bookkeeping plus a polling loop. poll() rather than
 * select(): rfbpf holds many descriptors (BPF maps, perf buffers) and a
 * socket numbered past FD_SETSIZE would be refused under select().
 *
 * rfbpf binds the socket itself and hands it to libmicrohttpd
 * (MHD_OPTION_LISTEN_SOCKET): MHD_start_daemon() reports a port in use
 * only as NULL and a log line, and `--listen` deserves a precise answer.
 *
 * Snapshots are reference-counted blobs: a response holds a reference
 * until libmicrohttpd has sent it (its free callback drops it), so a new
 * snapshot never waits for a slow client and is never copied per request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "model/clocks.h"
#include "http.h"

#define MAX_CONNECTIONS 32
/* An idle keep-alive connection holds a thread and a slot; Prometheus
 * reconnects when its next scrape finds the connection closed. */
#define IDLE_TIMEOUT_S 30
#define WINDOW_MAX_S 3600
/* How much longer than its window a ?seconds request waits for it. */
#define WINDOW_GRACE_S 60
/* A window counts as starting after a request that came this much later,
 * so one that arrives while the main loop is starting it is not lost. */
#define WINDOW_START_SLACK_S 0.1
/* How long http_stop waits for the 503s to waiting requests to be sent. */
#define STOP_DRAIN_S 2
#define LISTEN_BACKLOG 64

#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define TEXT_TYPE "text/plain; charset=utf-8"

struct blob {
	unsigned refs;		/* atomic: responses drop theirs unlocked */
	size_t len;
	uint8_t data[];
};

/* A ?seconds request blocked in its connection's thread (on its stack). */
struct window_wait {
	struct window_wait *next;
	double arrived_s;	/* CLOCK_MONOTONIC */
	unsigned seconds;
	struct blob *answer;	/* set, and unlinked, by the window's profile */
};

/* A /debug/rfbpf/trace request blocked in its connection's thread. */
struct trace_wait {
	struct trace_wait *next;
	struct http_trace_request req;
	bool claimed;		/* the main loop took it */
	bool answered;
	unsigned status;
	struct blob *answer;
	char why[200];		/* the one line of an error */
};

struct http_server {
	struct MHD_Daemon *mhd;
	unsigned port;
	pthread_mutex_t lock;
	/* Signalled when a window is answered, a ?seconds request completes,
	 * or the server stops. */
	pthread_cond_t changed;
	struct blob *metrics, *profile;	/* NULL until first published */
	struct window_wait *waiting;
	struct trace_wait *traces;	/* trace requests waiting */
	/* ?seconds requests not yet completed (answered ones included, until
	 * libmicrohttpd has sent the answer). */
	unsigned window_requests;
	bool starting, stopping;
	char start_log[160];	/* libmicrohttpd's last word while starting */
	time_t last_log;
	struct http_stats stats;
};

/* Addresses used only as markers in libmicrohttpd's per-request pointer. */
static char request_seen, window_request;

static struct timespec deadline_after(double seconds)
{
	double at = monotonic_s() + seconds;
	struct timespec t = { .tv_sec = (time_t)at };

	t.tv_nsec = (long)((at - t.tv_sec) * 1e9);
	return t;
}

static struct blob *blob_new(const void *data, size_t len)
{
	struct blob *b = malloc(sizeof(*b) + len);

	if (!b)
		return NULL;
	b->refs = 1;
	b->len = len;
	if (len)
		memcpy(b->data, data, len);
	return b;
}

static struct blob *blob_get(struct blob *b)
{
	__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
	return b;
}

/* void * so that it is also libmicrohttpd's free callback. */
static void blob_put(void *cls)
{
	struct blob *b = cls;

	if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(b);
}

static void count(struct http_server *s, uint64_t *counter)
{
	pthread_mutex_lock(&s->lock);
	(*counter)++;
	pthread_mutex_unlock(&s->lock);
}

/* ---- Responses ---------------------------------------------------- */

/* Queues r (taking it) with status; 400, 405, 503 and failures to answer
 * count as errors (404s have their own counter). */
static enum MHD_Result queue(struct http_server *s, struct MHD_Connection *c,
			     unsigned status, struct MHD_Response *r)
{
	enum MHD_Result ok = r ? MHD_queue_response(c, status, r) : MHD_NO;

	if (r)
		MHD_destroy_response(r);
	if (ok != MHD_YES || (status >= 400 && status != 404))
		count(s, &s->stats.errors);
	return ok;
}

/* A one-line static text. */
static struct MHD_Response *text(const char *line)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(line), (void *)line, MHD_RESPMEM_PERSISTENT);

	if (r)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					TEXT_TYPE);
	return r;
}

/* As net/http/pprof marks its errors: with X-Go-Pprof set and a text
 * type, `go tool pprof` prints the body instead of only the status. */
static struct MHD_Response *pprof_error(const char *line)
{
	struct MHD_Response *r = text(line);

	if (r) {
		MHD_add_response_header(r, "X-Go-Pprof", "1");
		MHD_add_response_header(r, "X-Content-Type-Options",
					"nosniff");
	}
	return r;
}

/* A response sending b's bytes; it takes the caller's reference. */
static struct MHD_Response *blob_response(struct blob *b, const char *type)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer_with_free_callback_cls(
			b->len, b->data, blob_put, b);

	if (!r) {
		blob_put(b);
		return NULL;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return r;
}

/* The headers net/http/pprof sends with a profile. */
static struct MHD_Response *profile_response(struct blob *b)
{
	struct MHD_Response *r = blob_response(b, "application/octet-stream");

	if (r) {
		MHD_add_response_header(r, "Content-Disposition",
					"attachment; filename=\"profile\"");
		MHD_add_response_header(r, "X-Content-Type-Options",
					"nosniff");
	}
	return r;
}

/* ---- Routes ------------------------------------------------------- */

/* The published blob *slot with a reference taken, or NULL. */
static struct blob *latest(struct http_server *s, struct blob **slot,
			   uint64_t *counter)
{
	struct blob *b;

	pthread_mutex_lock(&s->lock);
	(*counter)++;
	b = *slot ? blob_get(*slot) : NULL;
	pthread_mutex_unlock(&s->lock);
	return b;
}

static enum MHD_Result serve_metrics(struct http_server *s,
				     struct MHD_Connection *c)
{
	struct blob *b = latest(s, &s->metrics, &s->stats.metrics);

	if (!b)
		return queue(s, c, MHD_HTTP_SERVICE_UNAVAILABLE,
			text("no metrics yet: the first are ready after one "
			     "--interval\n"));
	return queue(s, c, MHD_HTTP_OK, blob_response(b, METRICS_TYPE));
}

/* 1..WINDOW_MAX_S in plain decimal digits, or 0. */
static unsigned parse_seconds(const char *v)
{
	unsigned n = 0;

	if (!v || !*v)
		return 0;
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return 0;
		n = n * 10 + (*v - '0');
		if (n > WINDOW_MAX_S)
			return 0;
	}
	return n;
}

/* Blocks until a window of `seconds` that started after now is delivered,
 * the wait times out, or the server stops. */
static struct blob *wait_for_window(struct http_server *s, unsigned seconds,
				    bool *stopping)
{
	struct window_wait w = { .arrived_s = monotonic_s(),
				 .seconds = seconds };
	struct timespec deadline = deadline_after(seconds + WINDOW_GRACE_S);

	pthread_mutex_lock(&s->lock);
	w.next = s->waiting;
	s->waiting = &w;
	while (!w.answer && !s->stopping)
		if (pthread_cond_timedwait(&s->changed, &s->lock,
					   &deadline) == ETIMEDOUT)
			break;
	if (!w.answer)
		for (struct window_wait **p = &s->waiting; *p;
		     p = &(*p)->next)
			if (*p == &w) {
				*p = w.next;
				break;
			}
	*stopping = s->stopping;
	pthread_mutex_unlock(&s->lock);
	return w.answer;
}

static enum MHD_Result serve_window(struct http_server *s,
				    struct MHD_Connection *c,
				    unsigned seconds, void **req_cls)
{
	struct blob *b;
	bool stopping;

	pthread_mutex_lock(&s->lock);
	stopping = s->stopping;
	if (!stopping) {
		s->window_requests++;		/* until on_completed */
		*req_cls = &window_request;
	}
	pthread_mutex_unlock(&s->lock);
	b = stopping ? NULL : wait_for_window(s, seconds, &stopping);
	if (b)
		return queue(s, c, MHD_HTTP_OK, profile_response(b));
	if (stopping)
		return queue(s, c, MHD_HTTP_SERVICE_UNAVAILABLE,
			     pprof_error("rfbpf is stopping\n"));
	return queue(s, c, MHD_HTTP_SERVICE_UNAVAILABLE,
		pprof_error("timed out waiting for the profile window (is "
			    "rfbpf's main loop stuck?)\n"));
}

static enum MHD_Result serve_profile(struct http_server *s,
				     struct MHD_Connection *c, void **req_cls)
{
	const char *arg = NULL;
	struct blob *b;
	unsigned seconds;

	if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "seconds",
					  strlen("seconds"), &arg,
					  NULL) == MHD_YES) {
		count(s, &s->stats.profile);
		seconds = parse_seconds(arg);
		if (!seconds)
			return queue(s, c, MHD_HTTP_BAD_REQUEST,
				pprof_error("bad ?seconds: want a whole number "
					    "of seconds from 1 to 3600\n"));
		return serve_window(s, c, seconds, req_cls);
	}
	b = latest(s, &s->profile, &s->stats.profile);
	if (!b)
		return queue(s, c, MHD_HTTP_SERVICE_UNAVAILABLE,
			pprof_error("no profile yet: the first is ready after "
				    "one --interval\n"));
	return queue(s, c, MHD_HTTP_OK, profile_response(b));
}

/* A whole decimal number from min to max, or -1. */
static long parse_count(const char *v, long min, long max)
{
	long n = 0;

	if (!v || !*v)
		return -1;
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return -1;
		n = n * 10 + (*v - '0');
		if (n > max)
			return -1;
	}
	return n < min ? -1 : n;
}

static const char *arg_of(struct MHD_Connection *c, const char *key)
{
	const char *v = NULL;

	MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, key,
				      strlen(key), &v, NULL);
	return v;
}

/* Blocks until the main loop answers w, the wait times out, or the
 * server stops. */
static void wait_for_trace(struct http_server *s, struct trace_wait *w)
{
	unsigned limit = w->req.seconds ? w->req.seconds + WINDOW_GRACE_S :
			 HTTP_TRACE_STEPS_WAIT_S;
	struct timespec deadline = deadline_after(limit);

	pthread_mutex_lock(&s->lock);
	w->next = s->traces;
	s->traces = w;
	s->window_requests++;
	while (!w->answered && !s->stopping)
		if (pthread_cond_timedwait(&s->changed, &s->lock,
					   &deadline) == ETIMEDOUT)
			break;
	for (struct trace_wait **p = &s->traces; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	if (!w->answered) {
		w->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(w->why, sizeof(w->why), "%s\n", s->stopping ?
			 "rfbpf is stopping" : "timed out waiting for the "
			 "trace (is rfbpf's main loop stuck?)");
	}
	pthread_mutex_unlock(&s->lock);
}

/* GET /debug/rfbpf/trace?pid=P&seconds=S (or &steps=N): a full trace of
 * job P, gzipped Chrome JSON, recorded from now on. */
static enum MHD_Result serve_trace(struct http_server *s,
				   struct MHD_Connection *c, void **req_cls)
{
	const char *pid = arg_of(c, "pid"), *sec = arg_of(c, "seconds");
	const char *steps = arg_of(c, "steps");
	struct trace_wait w = { .status = 0 };
	struct MHD_Response *r;
	long n;

	count(s, &s->stats.trace);
	if ((n = parse_count(pid, 1, 0x7fffffff)) < 0)
		return queue(s, c, MHD_HTTP_BAD_REQUEST,
			text("bad ?pid: want the process id of a job this "
			     "daemon traces\n"));
	w.req.pid = (int)n;
	if (!sec == !steps)
		return queue(s, c, MHD_HTTP_BAD_REQUEST,
			text("want one of ?seconds=S (1 to 600) or ?steps=N "
			     "(1 to 100)\n"));
	if (sec && (n = parse_count(sec, 1, HTTP_TRACE_MAX_S)) < 0)
		return queue(s, c, MHD_HTTP_BAD_REQUEST,
			text("bad ?seconds: want a whole number of seconds "
			     "from 1 to 600\n"));
	if (sec)
		w.req.seconds = (unsigned)n;
	if (steps && (n = parse_count(steps, 1, HTTP_TRACE_MAX_STEPS)) < 0)
		return queue(s, c, MHD_HTTP_BAD_REQUEST,
			text("bad ?steps: want a whole number of steps from "
			     "1 to 100\n"));
	if (steps)
		w.req.steps = (unsigned)n;
	*req_cls = &window_request;	/* http_stop waits for its answer */
	wait_for_trace(s, &w);
	if (w.status == MHD_HTTP_OK && w.answer) {
		char disp[96];

		r = blob_response(w.answer, "application/gzip");
		snprintf(disp, sizeof(disp), "attachment; filename=\"rfbpf-%d."
			 "pt.trace.json.gz\"", w.req.pid);
		if (r)
			MHD_add_response_header(r, "Content-Disposition",
						disp);
		return queue(s, c, MHD_HTTP_OK, r);
	}
	if (w.answer)
		blob_put(w.answer);
	r = MHD_create_response_from_buffer(strlen(w.why), w.why,
					    MHD_RESPMEM_MUST_COPY);
	if (r)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					TEXT_TYPE);
	return queue(s, c, w.status, r);
}

static enum MHD_Result route(struct http_server *s, struct MHD_Connection *c,
			     const char *url, void **req_cls)
{
	if (!strcmp(url, "/debug/rfbpf/trace"))
		return serve_trace(s, c, req_cls);
	if (!strcmp(url, "/metrics"))
		return serve_metrics(s, c);
	if (!strcmp(url, "/debug/pprof/profile"))
		return serve_profile(s, c, req_cls);
	if (!strcmp(url, "/healthz")) {
		count(s, &s->stats.healthz);
		return queue(s, c, MHD_HTTP_OK, text("ok\n"));
	}
	count(s, &s->stats.not_found);
	return queue(s, c, MHD_HTTP_NOT_FOUND,
		text("not found: rfbpf serves /metrics, /debug/pprof/profile, "
		     "/debug/rfbpf/trace and /healthz\n"));
}

static enum MHD_Result method_not_allowed(struct http_server *s,
					  struct MHD_Connection *c)
{
	struct MHD_Response *r = text("method not allowed: use GET\n");

	if (r)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	return queue(s, c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
}

/*
 * libmicrohttpd calls this once when the headers are in, then with each
 * piece of body, then once more with none. Answering on that last call
 * keeps the connection alive for the next request (an answer before the
 * body makes libmicrohttpd close it). Other methods are refused at once,
 * so their bodies are never read. HEAD is answered as GET; libmicrohttpd
 * leaves the body out.
 */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct http_server *s = cls;

	(void)version;
	(void)upload_data;
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return method_not_allowed(s, c);
	if (!*req_cls) {
		*req_cls = &request_seen;
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0;		/* a GET body means nothing */
		return MHD_YES;
	}
	return route(s, c, url, req_cls);
}

/* Called once the answer is sent (or the connection is lost). */
static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			 enum MHD_RequestTerminationCode why)
{
	struct http_server *s = cls;

	(void)c;
	(void)why;
	if (*req_cls == &window_request) {
		pthread_mutex_lock(&s->lock);
		s->window_requests--;
		pthread_cond_broadcast(&s->changed);
		pthread_mutex_unlock(&s->lock);
	}
	*req_cls = NULL;
}

/*
 * While starting, libmicrohttpd's last message becomes part of http_start's
 * error line. Later ones go to stderr, at most one every 10 s: a client
 * that drops connections in a loop must not flood the log.
 */
static void on_log(void *cls, const char *fmt, va_list ap)
{
	struct http_server *s = cls;
	time_t now = time(NULL);
	char line[160];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	pthread_mutex_lock(&s->lock);
	if (s->starting) {
		memcpy(s->start_log, line, n + 1);
	} else if (now - s->last_log >= 10) {
		s->last_log = now;
		fprintf(stderr, "rfbpf: http: %s\n", line);
	}
	pthread_mutex_unlock(&s->lock);
}

/* ---- Listening ---------------------------------------------------- */

/* "ADDR:PORT" as a socket address; `any` when ADDR is "" or "*". */
static int parse_listen(const char *listen, struct sockaddr_storage *ss,
			bool *any, char *err, size_t errlen)
{
	const char *colon = strrchr(listen, ':');
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	char host[INET6_ADDRSTRLEN + 2];
	size_t hlen = colon ? (size_t)(colon - listen) : 0;
	unsigned long port = 0;
	const char *p;

	memset(ss, 0, sizeof(*ss));
	if (!colon || !colon[1] || hlen >= sizeof(host) ||
	    (listen[0] == '[' && colon[-1] != ']')) {
		snprintf(err, errlen, "bad --listen '%s': want ADDR:PORT "
			 "(e.g. :9464, 127.0.0.1:9464, [::1]:9464)", listen);
		return -EINVAL;
	}
	for (p = colon + 1; *p >= '0' && *p <= '9' && port <= 65535; p++)
		port = port * 10 + (*p - '0');
	if (*p || port > 65535) {
		snprintf(err, errlen, "bad --listen '%s': the port must be a "
			 "number from 0 to 65535", listen);
		return -EINVAL;
	}
	memcpy(host, listen, hlen);
	host[hlen] = '\0';
	*any = !hlen || !strcmp(host, "*");
	in4->sin_family = AF_INET;
	in4->sin_port = htons(port);
	if (*any || inet_pton(AF_INET, host, &in4->sin_addr) == 1)
		return 0;
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(port);
	if (hlen > 2 && host[0] == '[' && host[hlen - 1] == ']') {
		host[hlen - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) == 1)
			return 0;
	}
	snprintf(err, errlen, "bad --listen '%s': '%s' is not an IPv4 "
		 "address or an IPv6 address in brackets (names are not "
		 "looked up; leave ADDR empty for all addresses)", listen,
		 hlen ? host : "");
	return -EINVAL;
}

static int listen_on(const struct sockaddr_storage *ss, bool dual_stack)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1, zero = 0, e;
	socklen_t len = ss->ss_family == AF_INET6 ?
		sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);

	if (fd < 0)
		return -errno;
	/* A restarted rfbpf may bind while the old one's connections are in
	 * TIME_WAIT; a port with a live listener is still refused. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (dual_stack)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, (const struct sockaddr *)ss, len) ||
	    listen(fd, LISTEN_BACKLOG)) {
		e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* Every address: IPv6 and IPv4 on one socket, or IPv4 alone on a host
 * without IPv6. */
static int listen_any(struct sockaddr_storage *ss)
{
	in_port_t port = ((struct sockaddr_in *)ss)->sin_port;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	int fd;

	memset(ss, 0, sizeof(*ss));
	in6->sin6_family = AF_INET6;
	in6->sin6_port = port;
	in6->sin6_addr = in6addr_any;
	fd = listen_on(ss, true);
	if (fd != -EAFNOSUPPORT && fd != -EADDRNOTAVAIL)
		return fd;
	memset(ss, 0, sizeof(*ss));
	((struct sockaddr_in *)ss)->sin_family = AF_INET;
	((struct sockaddr_in *)ss)->sin_port = port;
	return listen_on(ss, false);
}

static void explain_listen_error(int e, const char *listen, char *err,
				 size_t errlen)
{
	if (e == -EADDRINUSE)
		snprintf(err, errlen, "%s: address already in use (another "
			 "rfbpf or exporter? choose another --listen port)",
			 listen);
	else if (e == -EACCES)
		snprintf(err, errlen, "%s: permission denied (ports below 1024 "
			 "need CAP_NET_BIND_SERVICE; choose a --listen port "
			 "from 1024 up)", listen);
	else if (e == -EADDRNOTAVAIL)
		snprintf(err, errlen, "%s: address not available (not an "
			 "address of this host; give one of its addresses, or "
			 ":PORT for all)", listen);
	else
		snprintf(err, errlen, "%s: cannot listen: %s", listen,
			 strerror(-e));
}

static unsigned bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return 0;
	return ntohs(ss.ss_family == AF_INET6 ?
		     ((struct sockaddr_in6 *)&ss)->sin6_port :
		     ((struct sockaddr_in *)&ss)->sin_port);
}

/* ---- Starting and stopping ---------------------------------------- */

static struct http_server *server_new(void)
{
	struct http_server *s = calloc(1, sizeof(*s));
	pthread_condattr_t attr;

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	/* Deadlines are on CLOCK_MONOTONIC, like the windows. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->changed, &attr);
	pthread_condattr_destroy(&attr);
	return s;
}

static void server_free(struct http_server *s)
{
	blob_put(s->metrics);
	blob_put(s->profile);
	pthread_cond_destroy(&s->changed);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static struct MHD_Daemon *start_mhd(struct http_server *s, int fd, bool ipv6)
{
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			 MHD_USE_ITC |		/* for MHD_quiesce_daemon */
			 MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);

	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
		MHD_OPTION_EXTERNAL_LOGGER, on_log, s,
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
		MHD_OPTION_END);
}

int http_start(const char *listen, struct http_server **out, char *err,
	       size_t errlen)
{
	struct sockaddr_storage ss;
	struct http_server *s;
	bool any;
	int fd;

	*out = NULL;
	fd = parse_listen(listen, &ss, &any, err, errlen);
	if (fd)
		return fd;
	fd = any ? listen_any(&ss) : listen_on(&ss, false);
	if (fd < 0) {
		explain_listen_error(fd, listen, err, errlen);
		return fd;
	}
	s = server_new();
	if (!s) {
		close(fd);
		snprintf(err, errlen, "%s: out of memory", listen);
		return -ENOMEM;
	}
	s->port = bound_port(fd);
	s->starting = true;		/* no other thread yet */
	s->mhd = start_mhd(s, fd, ss.ss_family == AF_INET6);
	pthread_mutex_lock(&s->lock);	/* on_log may run in its threads */
	s->starting = false;
	pthread_mutex_unlock(&s->lock);
	if (!s->mhd) {
		/* libmicrohttpd closes the socket on some failures only. */
		if (fcntl(fd, F_GETFD) >= 0)
			close(fd);
		snprintf(err, errlen, "%s: could not start the HTTP server "
			 "(libmicrohttpd: %s)", listen,
			 s->start_log[0] ? s->start_log : "no reason given");
		server_free(s);
		return -EIO;
	}
	*out = s;
	return 0;
}

unsigned http_port(const struct http_server *s)
{
	return s->port;
}

/*
 * libmicrohttpd's stop shuts every connection's socket down at once, so
 * an answer still being sent would be cut. The order is: stop accepting,
 * wake the waiting requests (they answer 503), give those answers a
 * moment to leave, then stop and join.
 */
void http_stop(struct http_server *s)
{
	struct timespec deadline = deadline_after(STOP_DRAIN_S);
	MHD_socket listen_fd;

	if (!s)
		return;
	listen_fd = MHD_quiesce_daemon(s->mhd);
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_broadcast(&s->changed);
	while (s->window_requests)
		if (pthread_cond_timedwait(&s->changed, &s->lock,
					   &deadline) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&s->lock);
	MHD_stop_daemon(s->mhd);
	if (listen_fd != MHD_INVALID_SOCKET)	/* quiesced: ours to close */
		close(listen_fd);
	server_free(s);
}

/* ---- Publishing --------------------------------------------------- */

/* Replaces *slot; on ENOMEM the previous snapshot stays. */
static void publish(struct http_server *s, struct blob **slot,
		    const void *data, size_t len)
{
	struct blob *b = blob_new(data, len), *old;

	if (!b)
		return;
	pthread_mutex_lock(&s->lock);
	old = *slot;
	*slot = b;
	pthread_mutex_unlock(&s->lock);
	blob_put(old);
}

void http_set_metrics(struct http_server *s, const char *text, size_t len)
{
	publish(s, &s->metrics, text, len);
}

void http_set_profile(struct http_server *s, const uint8_t *gz, size_t len)
{
	publish(s, &s->profile, gz, len);
}

unsigned http_window_wanted(struct http_server *s)
{
	unsigned longest = 0;

	pthread_mutex_lock(&s->lock);
	for (struct window_wait *w = s->waiting; w; w = w->next)
		if (w->seconds > longest)
			longest = w->seconds;
	pthread_mutex_unlock(&s->lock);
	return longest;
}

void http_set_window_profile(struct http_server *s, const uint8_t *gz,
			     size_t len, double start_s, double seconds)
{
	struct blob *b = blob_new(gz, len);

	if (!b)
		return;		/* the requests wait for the next window */
	pthread_mutex_lock(&s->lock);
	for (struct window_wait **p = &s->waiting; *p;) {
		struct window_wait *w = *p;

		if (w->arrived_s <= start_s + WINDOW_START_SLACK_S &&
		    w->seconds <= seconds) {
			w->answer = blob_get(b);
			*p = w->next;
		} else {
			p = &w->next;
		}
	}
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	blob_put(b);
}

void http_get_stats(struct http_server *s, struct http_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	pthread_mutex_unlock(&s->lock);
}

int http_trace_requests(struct http_server *s,
			struct http_trace_request *out, int max)
{
	int n = 0;

	pthread_mutex_lock(&s->lock);
	for (struct trace_wait *w = s->traces; w && n < max; w = w->next)
		if (!w->claimed) {
			w->claimed = true;
			out[n++] = w->req;
		}
	pthread_mutex_unlock(&s->lock);
	return n;
}

void http_answer_trace(struct http_server *s, int pid, unsigned status,
		       const void *body, size_t len)
{
	struct blob *b = status == 200 ? blob_new(body, len) : NULL;

	if (status == 200 && !b) {
		status = MHD_HTTP_SERVICE_UNAVAILABLE;
		body = "out of memory holding the trace\n";
		len = strlen(body);
	}
	pthread_mutex_lock(&s->lock);
	for (struct trace_wait *w = s->traces; w; w = w->next) {
		if (w->req.pid != pid || !w->claimed || w->answered)
			continue;
		w->answered = true;
		w->status = status;
		if (b)
			w->answer = blob_get(b);
		else
			snprintf(w->why, sizeof(w->why), "%.*s",
				 (int)(len < sizeof(w->why) ? len :
				       sizeof(w->why) - 1), (const char *)body);
	}
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	if (b)
		blob_put(b);
}
