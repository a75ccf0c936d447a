/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Fleet mode's HTTP endpoint (libmicrohttpd): what Prometheus, Parca,
 * Pyroscope and `go tool pprof` scrape.
 *
 *   GET /metrics               the last text from http_set_metrics
 *   GET /debug/pprof/profile   the last interval's gzipped pprof, as Go's
 *                              net/http/pprof serves it
 *       ?seconds=N             waits for a profile of a window of N
 *                              seconds that starts after the request came
 *   GET /debug/rfbpf/trace     a full trace of one job, gzipped Chrome
 *       ?pid=P&seconds=S       JSON, recorded from the request on for S
 *       ?pid=P&steps=N         seconds (1..600) or N training steps
 *                              (1..100): the main loop takes the request
 *                              (http_trace_requests) and answers it
 *                              (http_answer_trace)
 *   GET /healthz               "ok"
 *
 * The server never reaches into the profiler: the main loop publishes
 * finished snapshots (copied here, so its buffers stay its own) and the
 * server's threads only read them. A ?seconds request asks for something
 * that does not exist yet, so it is the one thing that flows the other
 * way: the main loop polls http_window_wanted(), records that long, and
 * answers with http_set_window_profile().
 *
 * Each connection has its own thread (at most 32), so a request waiting
 * for its window holds up nothing else.
 */
#ifndef RFBPF_FLEET_HTTP_H
#define RFBPF_FLEET_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct http_server;

/* Binds and starts serving. listen is "ADDR:PORT": IPv4 dotted,
 * "[IPv6]:PORT", or ":PORT" / "*:PORT" for every address (IPv6 and IPv4
 * when the host has IPv6). PORT 0 picks a free port (see http_port).
 * Binding happens here, so a port in use is reported before anything
 * else starts. Returns 0, or -errno with one line in err saying what is
 * wrong and what to do. */
int http_start(const char *listen, struct http_server **out, char *err,
	       size_t errlen);
/* The port actually bound. */
unsigned http_port(const struct http_server *s);
/* Stops accepting, answers requests still waiting with 503, joins the
 * threads and frees s. NULL is allowed. */
void http_stop(struct http_server *s);

/* Publish the latest snapshots (copied; thread-safe). */
void http_set_metrics(struct http_server *s, const char *text, size_t len);
void http_set_profile(struct http_server *s, const uint8_t *gz, size_t len);

/* The longest ?seconds asked by requests still waiting, or 0. */
unsigned http_window_wanted(struct http_server *s);
/* A profile of [start_s, start_s + seconds) on CLOCK_MONOTONIC. Answers
 * every waiting request that arrived at or before start_s + 0.1 and asked
 * for at most `seconds`; the others keep waiting for a later window. */
void http_set_window_profile(struct http_server *s, const uint8_t *gz,
			     size_t len, double start_s, double seconds);

#define HTTP_TRACE_MAX_S	600
#define HTTP_TRACE_MAX_STEPS	100
/* How long a ?steps request waits for its steps. */
#define HTTP_TRACE_STEPS_WAIT_S	240

struct http_trace_request {
	int pid;
	unsigned seconds, steps;	/* one of them is 0 */
};
/* Trace requests not yet taken, now taken (at most max). */
int http_trace_requests(struct http_server *s,
			struct http_trace_request *out, int max);
/* Answers every taken request for pid: status 200 with the gzipped
 * trace as body, else the status and a one-line body. */
void http_answer_trace(struct http_server *s, int pid, unsigned status,
		       const void *body, size_t len);

/* Requests since start, for rfbpf's own metrics. metrics, profile and
 * healthz count every request to that path whatever its answer;
 * not_found counts the 404s; errors counts answers 400, 405 and 503 and
 * requests that could not be answered at all. */
struct http_stats {
	uint64_t metrics, profile, healthz, trace, not_found, errors;
};
void http_get_stats(struct http_server *s, struct http_stats *out);

#endif
