// SPDX-License-Identifier: BSD-2-Clause
/*
 * fleet/http.c through real sockets on 127.0.0.1: routes, headers, exact
 * bytes, ?seconds windows, stopping, and --listen errors. The client is a
 * plain socket written here, so the test needs nothing installed. Waits
 * are generous (10 s and more) and only bound a failure: nothing passes
 * or fails on how fast the machine is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "fleet/http.h"

#define PROFILE_PATH "/debug/pprof/profile"

struct reply {
	int status;		/* 0 if no answer came */
	char head[4096];	/* status line and headers, NUL-terminated */
	uint8_t body[65536];
	size_t body_len;
};

static int connect_to(int family, unsigned port)
{
	struct sockaddr_storage ss = {};
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	struct timeval tv = { .tv_sec = 120 };	/* bounds a hung test */
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (family == AF_INET6) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		in6->sin6_addr = in6addr_loopback;
	} else {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(port);
		in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	if (connect(fd, (struct sockaddr *)&ss, sizeof(ss))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends `request` verbatim and reads until the server closes. */
static size_t exchange(int family, unsigned port, const char *request,
		       char *out, size_t cap)
{
	int fd = connect_to(family, port);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return 0;
	if (write(fd, request, strlen(request)) != (ssize_t)strlen(request)) {
		close(fd);
		return 0;
	}
	while (len < cap && (n = read(fd, out + len, cap - len)) > 0)
		len += n;
	close(fd);
	return len;
}

/* Splits a raw answer into status, head and body. */
static void parse_reply(const char *raw, size_t len, struct reply *r)
{
	const char *end = memmem(raw, len, "\r\n\r\n", 4);
	size_t head_len;

	memset(r, 0, sizeof(*r));
	if (!end || sscanf(raw, "HTTP/1.%*d %d", &r->status) != 1) {
		r->status = 0;
		return;
	}
	head_len = end - raw + 2;	/* keeps the last header's CRLF */
	if (head_len >= sizeof(r->head))
		head_len = sizeof(r->head) - 1;
	memcpy(r->head, raw, head_len);
	r->body_len = len - (end + 4 - raw);
	if (r->body_len > sizeof(r->body))
		r->body_len = sizeof(r->body);
	memcpy(r->body, end + 4, r->body_len);
}

static void request_on(int family, unsigned port, const char *method,
		       const char *path, struct reply *r)
{
	static __thread char raw[sizeof(r->head) + sizeof(r->body)];
	char req[512];
	size_t len;

	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: test\r\n"
		 "Connection: close\r\n\r\n", method, path);
	len = exchange(family, port, req, raw, sizeof(raw));
	parse_reply(raw, len, r);
}

static void request(unsigned port, const char *method, const char *path,
		    struct reply *r)
{
	request_on(AF_INET, port, method, path, r);
}

/* The value of header `name` (case-insensitive), or NULL. */
static const char *header(const struct reply *r, const char *name)
{
	static __thread char value[512];
	size_t nlen = strlen(name);

	for (const char *p = strstr(r->head, "\r\n"); p;
	     p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2, *eol = strstr(line, "\r\n");

		if (!eol || strncasecmp(line, name, nlen) || line[nlen] != ':')
			continue;
		line += nlen + 1;
		while (*line == ' ')
			line++;
		snprintf(value, sizeof(value), "%.*s", (int)(eol - line),
			 line);
		return value;
	}
	return NULL;
}

static bool body_is(const struct reply *r, const void *data, size_t len)
{
	return r->body_len == len && !memcmp(r->body, data, len);
}

static bool body_is_text(const struct reply *r, const char *text)
{
	return body_is(r, text, strlen(text));
}

/* One line of text, ending in a newline. */
static bool body_is_one_line(const struct reply *r)
{
	return r->body_len > 1 && r->body[r->body_len - 1] == '\n' &&
	       !memchr(r->body, '\n', r->body_len - 1);
}

static struct http_server *start_local(void)
{
	struct http_server *s = NULL;
	char err[256] = "";
	int rc = http_start("127.0.0.1:0", &s, err, sizeof(err));

	if (rc)
		fprintf(stderr, "  http_start: %d %s\n", rc, err);
	CHECK_EQ_U64(rc, 0);
	CHECK(s && http_port(s) > 0);
	return s;
}

static double mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec t = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	nanosleep(&t, NULL);
}

/* Polls http_window_wanted until it returns `want`; false after 10 s. */
static bool wait_wanted(struct http_server *s, unsigned want)
{
	for (double end = mono_s() + 10; mono_s() < end; sleep_s(0.005))
		if (http_window_wanted(s) == want)
			return true;
	return false;
}

TEST(healthz_and_not_found)
{
	struct http_server *s = start_local();
	struct reply r;

	if (!s)
		return;
	request(http_port(s), "GET", "/healthz", &r);
	CHECK_EQ_U64(r.status, 200);
	CHECK(body_is_text(&r, "ok\n"));
	request(http_port(s), "GET", "/nope", &r);
	CHECK_EQ_U64(r.status, 404);
	CHECK(body_is_one_line(&r));
	CHECK(memmem(r.body, r.body_len, "/metrics", 8));
	CHECK(memmem(r.body, r.body_len, PROFILE_PATH, strlen(PROFILE_PATH)));
	CHECK(memmem(r.body, r.body_len, "/healthz", 8));
	/* Near misses are other paths too. */
	request(http_port(s), "GET", "/metrics/", &r);
	CHECK_EQ_U64(r.status, 404);
	request(http_port(s), "GET", "/debug/pprof/heap", &r);
	CHECK_EQ_U64(r.status, 404);
	http_stop(s);
}

TEST(metrics_before_and_after_publishing)
{
	const char *text = "# HELP up_total h\n# TYPE up_total counter\n"
			   "up_total 1\n";
	struct http_server *s = start_local();
	struct reply r;

	if (!s)
		return;
	request(http_port(s), "GET", "/metrics", &r);
	CHECK_EQ_U64(r.status, 503);
	CHECK(body_is_one_line(&r));
	http_set_metrics(s, text, strlen(text));
	request(http_port(s), "GET", "/metrics", &r);
	CHECK_EQ_U64(r.status, 200);
	CHECK_STR(header(&r, "Content-Type"),
		  "text/plain; version=0.0.4; charset=utf-8");
	CHECK(body_is_text(&r, text));
	/* A newer snapshot replaces it; the caller's buffer is not kept. */
	char again[] = "up_total 2\n";
	http_set_metrics(s, again, strlen(again));
	memset(again, 'x', strlen(again));
	request(http_port(s), "GET", "/metrics", &r);
	CHECK(body_is_text(&r, "up_total 2\n"));
	/* HEAD: the same headers, no body. */
	request(http_port(s), "HEAD", "/metrics", &r);
	CHECK_EQ_U64(r.status, 200);
	CHECK_STR(header(&r, "Content-Length"), "11");
	CHECK_EQ_U64(r.body_len, 0);
	http_stop(s);
}

TEST(profile_503_then_exact_bytes_and_headers)
{
	/* gzip's magic, NULs, a CRLF and high bytes: binary-safe. */
	const uint8_t gz[] = { 0x1f, 0x8b, 0x08, 0x00, 0x00, '\r', '\n',
			       0xff, 0x80, 0x00, 0x7f };
	struct http_server *s = start_local();
	struct reply r;

	if (!s)
		return;
	request(http_port(s), "GET", PROFILE_PATH, &r);
	CHECK_EQ_U64(r.status, 503);
	CHECK(body_is_text(&r, "no profile yet: the first is ready after "
			   "one --interval\n"));
	CHECK_STR(header(&r, "X-Go-Pprof"), "1");
	http_set_profile(s, gz, sizeof(gz));
	request(http_port(s), "GET", PROFILE_PATH, &r);
	CHECK_EQ_U64(r.status, 200);
	CHECK_STR(header(&r, "Content-Type"), "application/octet-stream");
	CHECK_STR(header(&r, "Content-Disposition"),
		  "attachment; filename=\"profile\"");
	CHECK_STR(header(&r, "Content-Length"), "11");
	CHECK(header(&r, "Content-Encoding") == NULL);
	CHECK(body_is(&r, gz, sizeof(gz)));
	/* An empty profile is still a profile. */
	http_set_profile(s, gz, 0);
	request(http_port(s), "GET", PROFILE_PATH, &r);
	CHECK_EQ_U64(r.status, 200);
	CHECK_EQ_U64(r.body_len, 0);
	http_stop(s);
}

TEST(methods_other_than_get_and_head_are_405)
{
	const char *post = "POST /metrics HTTP/1.1\r\nHost: t\r\n"
			   "Content-Length: 5\r\nConnection: close\r\n\r\nhello";
	struct http_server *s = start_local();
	static char raw[8192];
	struct reply r;
	size_t len;

	if (!s)
		return;
	len = exchange(AF_INET, http_port(s), post, raw, sizeof(raw));
	parse_reply(raw, len, &r);
	CHECK_EQ_U64(r.status, 405);
	CHECK_STR(header(&r, "Allow"), "GET, HEAD");
	CHECK(body_is_one_line(&r));
	request(http_port(s), "DELETE", "/healthz", &r);
	CHECK_EQ_U64(r.status, 405);
	request(http_port(s), "PUT", "/nope", &r);
	CHECK_EQ_U64(r.status, 405);
	http_stop(s);
}

TEST(bad_seconds_are_400)
{
	const char *bad[] = { "abc", "0", "3601", "-1", "1.5", "", "+1",
			      " 1", "1x", "99999999999999999999" };
	struct http_server *s = start_local();
	char path[128];
	struct reply r;

	if (!s)
		return;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(path, sizeof(path), PROFILE_PATH "?seconds=%s",
			 bad[i]);
		request(http_port(s), "GET", path, &r);
		if (r.status != 400)
			fprintf(stderr, "  seconds='%s' got %d\n", bad[i],
				r.status);
		CHECK_EQ_U64(r.status, 400);
		CHECK(body_is_one_line(&r));
	}
	request(http_port(s), "GET", PROFILE_PATH "?seconds", &r);
	CHECK_EQ_U64(r.status, 400);
	CHECK_EQ_U64(http_window_wanted(s), 0);
	http_stop(s);
}

/* A client in its own thread: GET `path`, the reply kept for the test. */
struct client {
	pthread_t thread;
	unsigned port;
	const char *path;
	struct reply reply;
	volatile bool done;
};

static void *client_main(void *arg)
{
	struct client *c = arg;

	request(c->port, "GET", c->path, &c->reply);
	__atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void client_start(struct client *c, unsigned port, const char *path)
{
	memset(c, 0, sizeof(*c));
	c->port = port;
	c->path = path;
	CHECK(pthread_create(&c->thread, NULL, client_main, c) == 0);
}

static bool client_done(struct client *c)
{
	return __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
}

/* The main loop's part, ~200 ms after it saw the request. */
struct publisher {
	struct http_server *s;
	unsigned wanted_seen;
	const uint8_t *gz;
	size_t len;
};

static void *publisher_main(void *arg)
{
	struct publisher *p = arg;
	double start;

	if (!wait_wanted(p->s, 1))
		return NULL;
	p->wanted_seen = http_window_wanted(p->s);
	start = mono_s();		/* the window starts after the request */
	sleep_s(0.2);
	http_set_window_profile(p->s, p->gz, p->len, start, 1);
	return NULL;
}

TEST(seconds_waits_for_its_window)
{
	const uint8_t gz[] = { 0x1f, 0x8b, 'w', 0, 'i', 'n' };
	struct http_server *s = start_local();
	struct publisher p = { .s = s, .gz = gz, .len = sizeof(gz) };
	pthread_t publisher;
	struct reply r;

	if (!s)
		return;
	CHECK_EQ_U64(http_window_wanted(s), 0);
	/* The latest interval's profile is not what ?seconds gets. */
	http_set_profile(s, (const uint8_t *)"interval", 8);
	CHECK(pthread_create(&publisher, NULL, publisher_main, &p) == 0);
	request(http_port(s), "GET", PROFILE_PATH "?seconds=1", &r);
	pthread_join(publisher, NULL);
	CHECK_EQ_U64(p.wanted_seen, 1);
	CHECK_EQ_U64(r.status, 200);
	CHECK_STR(header(&r, "Content-Type"), "application/octet-stream");
	CHECK_STR(header(&r, "Content-Disposition"),
		  "attachment; filename=\"profile\"");
	CHECK(body_is(&r, gz, sizeof(gz)));
	CHECK_EQ_U64(http_window_wanted(s), 0);
	http_stop(s);
}

TEST(window_that_started_before_the_request_does_not_answer_it)
{
	struct http_server *s = start_local();
	struct client c;

	if (!s)
		return;
	client_start(&c, http_port(s), PROFILE_PATH "?seconds=2");
	CHECK(wait_wanted(s, 2));
	/* Started 5 s ago: covers time before the request. */
	http_set_window_profile(s, (const uint8_t *)"old", 3, mono_s() - 5, 2);
	sleep_s(0.2);
	CHECK(!client_done(&c));
	CHECK_EQ_U64(http_window_wanted(s), 2);
	/* Too short a window does not answer it either. */
	http_set_window_profile(s, (const uint8_t *)"short", 5, mono_s(), 1);
	sleep_s(0.2);
	CHECK(!client_done(&c));
	CHECK_EQ_U64(http_window_wanted(s), 2);
	/* A window started after the request, long enough. */
	http_set_window_profile(s, (const uint8_t *)"new", 3, mono_s(), 2);
	pthread_join(c.thread, NULL);
	CHECK_EQ_U64(c.reply.status, 200);
	CHECK(body_is(&c.reply, "new", 3));
	CHECK_EQ_U64(http_window_wanted(s), 0);
	http_stop(s);
}

TEST(one_window_answers_every_request_it_covers)
{
	struct http_server *s = start_local();
	struct client a, b, longer;

	if (!s)
		return;
	/* One at a time, so each is known to be waiting before the next. */
	client_start(&a, http_port(s), PROFILE_PATH "?seconds=1");
	CHECK(wait_wanted(s, 1));
	client_start(&b, http_port(s), PROFILE_PATH "?seconds=3");
	CHECK(wait_wanted(s, 3));
	client_start(&longer, http_port(s), PROFILE_PATH "?seconds=10");
	CHECK(wait_wanted(s, 10));
	/* The others are waiting too: a blocked request blocks no other. */
	struct reply r;
	request(http_port(s), "GET", "/healthz", &r);
	CHECK_EQ_U64(r.status, 200);
	http_set_window_profile(s, (const uint8_t *)"w3", 2, mono_s(), 3);
	pthread_join(a.thread, NULL);
	pthread_join(b.thread, NULL);
	CHECK(body_is(&a.reply, "w3", 2) && a.reply.status == 200);
	CHECK(body_is(&b.reply, "w3", 2) && b.reply.status == 200);
	CHECK(!client_done(&longer));
	CHECK_EQ_U64(http_window_wanted(s), 10);
	http_set_window_profile(s, (const uint8_t *)"w10", 3, mono_s(), 10);
	pthread_join(longer.thread, NULL);
	CHECK(body_is(&longer.reply, "w10", 3));
	http_stop(s);
}

TEST(stop_answers_waiting_requests_503)
{
	struct http_server *s = start_local();
	struct client c;

	if (!s)
		return;
	client_start(&c, http_port(s), PROFILE_PATH "?seconds=5");
	CHECK(wait_wanted(s, 5));
	http_stop(s);
	pthread_join(c.thread, NULL);
	CHECK_EQ_U64(c.reply.status, 503);
	CHECK(body_is_text(&c.reply, "rfbpf is stopping\n"));
}

TEST(keep_alive_serves_requests_in_turn)
{
	const char *two = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
			  "GET /healthz HTTP/1.1\r\nHost: t\r\n"
			  "Connection: close\r\n\r\n";
	struct http_server *s = start_local();
	static char raw[8192];
	size_t len;

	if (!s)
		return;
	len = exchange(AF_INET, http_port(s), two, raw, sizeof(raw) - 1);
	raw[len] = '\0';
	char *second = strstr(raw, "HTTP/1.1 200");
	CHECK(second && strstr(second + 1, "HTTP/1.1 200"));
	http_stop(s);
}

TEST(stats_count_paths_and_errors)
{
	struct http_server *s = start_local();
	struct http_stats st;
	struct reply r;

	if (!s)
		return;
	request(http_port(s), "GET", "/metrics", &r);		/* 503 */
	http_set_metrics(s, "m 1\n", 4);
	request(http_port(s), "GET", "/metrics", &r);
	request(http_port(s), "GET", PROFILE_PATH, &r);	/* 503 */
	request(http_port(s), "GET", PROFILE_PATH "?seconds=x", &r);
	request(http_port(s), "GET", "/healthz", &r);
	request(http_port(s), "GET", "/a", &r);
	request(http_port(s), "GET", "/b", &r);
	request(http_port(s), "POST", "/metrics", &r);		/* 405 */
	http_get_stats(s, &st);
	CHECK_EQ_U64(st.metrics, 2);
	CHECK_EQ_U64(st.profile, 2);
	CHECK_EQ_U64(st.healthz, 1);
	CHECK_EQ_U64(st.not_found, 2);
	CHECK_EQ_U64(st.errors, 4);
	http_stop(s);
}

TEST(port_in_use_is_reported)
{
	struct http_server *s = start_local(), *t = NULL;
	char listen[64], err[256] = "";
	int rc;

	if (!s)
		return;
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", http_port(s));
	rc = http_start(listen, &t, err, sizeof(err));
	CHECK_EQ_U64(rc, -EADDRINUSE);
	CHECK(t == NULL);
	CHECK(strstr(err, "in use") != NULL);
	CHECK(strstr(err, listen) != NULL);
	CHECK(!strchr(err, '\n'));
	/* All addresses include 127.0.0.1. */
	snprintf(listen, sizeof(listen), ":%u", http_port(s));
	CHECK_EQ_U64(http_start(listen, &t, err, sizeof(err)), -EADDRINUSE);
	http_stop(s);
}

TEST(bad_listen_strings_are_rejected)
{
	const char *bad[] = { "x", "", "9090", "127.0.0.1", "127.0.0.1:",
			      "127.0.0.1:65536", "127.0.0.1:-1", "1.2.3.4:ab",
			      "localhost:9090", "::1:9090", "[::1]",
			      "[::1:9090", "[nope]:9090", "127.1:9090",
			      "1.2.3.4.5:80", ":99999999999999999999" };
	struct http_server *s;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		s = NULL;
		int rc = http_start(bad[i], &s, err, sizeof(err));

		if (rc != -EINVAL)
			fprintf(stderr, "  '%s': %d %s\n", bad[i], rc, err);
		CHECK_EQ_U64(rc, -EINVAL);
		CHECK(s == NULL);
		CHECK(strstr(err, "bad --listen") != NULL);
		CHECK(strstr(err, bad[i]) != NULL);
		CHECK(!strchr(err, '\n'));
	}
	/* A message that does not fit is cut, not overrun. */
	CHECK_EQ_U64(http_start("x", &s, err, 8), -EINVAL);
	CHECK_EQ_U64(strlen(err), 7);
}

TEST(all_addresses_and_ipv6)
{
	struct http_server *s = NULL;
	char err[256] = "";
	struct reply r;

	CHECK_EQ_U64(http_start("*:0", &s, err, sizeof(err)), 0);
	if (s) {
		request(http_port(s), "GET", "/healthz", &r);
		CHECK_EQ_U64(r.status, 200);
		http_stop(s);
	}
	s = NULL;
	int rc = http_start("[::1]:0", &s, err, sizeof(err));
	if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT) {
		printf("skip all_addresses_and_ipv6 [::1]: %s\n", err);
		return;
	}
	CHECK_EQ_U64(rc, 0);
	if (s) {
		request_on(AF_INET6, http_port(s), "GET", "/healthz", &r);
		CHECK_EQ_U64(r.status, 200);
		http_stop(s);
	}
	http_stop(NULL);
}

RUN_TESTS()
