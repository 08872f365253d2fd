/* The C interface of primus-launch's metrics module (primus-metrics.so, built from
 * launcher/monitor/metrics_module.cpp), which primus-launch loads with dlopen() only when
 * --primus-metrics is given: the HTTP library and the TLS library it links (about 1.5 ms of
 * loading and initialising at every start, half of primus-launch's own start) stay out of the
 * jobs that do not serve metrics. No function throws. */
#ifndef PRIMUS_LAUNCH_METRICS_ABI_H
#define PRIMUS_LAUNCH_METRICS_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PRIMUS_METRICS_ABI_VERSION 2

struct primus_metrics;

/* The module's PRIMUS_METRICS_ABI_VERSION: a loader refuses another. */
int primus_metrics_abi_version(void);
/* Listens on host:port (port 0: a free one) and serves /metrics from a thread of its own.
 * NULL when it cannot listen, with the reason in error (error_size bytes, NUL-terminated). */
struct primus_metrics* primus_metrics_open(const char* host, uint16_t port, char* error,
                                           size_t error_size);
/* The port it listens on. */
uint16_t primus_metrics_port(const struct primus_metrics* server);
/* The text /metrics serves from now on. 0 on success, -1 when out of memory. */
int primus_metrics_publish(struct primus_metrics* server, const char* text, size_t size);
/* The text is built when it is asked for: a GET of /metrics makes this descriptor (an eventfd)
 * readable and waits up to a second for the next primus_metrics_publish(), then serves the
 * newest text it has. The launcher's loop watches the descriptor. */
int primus_metrics_wake_fd(const struct primus_metrics* server);
/* 1 when a GET waits for a text since the last call (and the descriptor is read empty), 0 not. */
int primus_metrics_take_request(struct primus_metrics* server);
/* Stops serving, joins the thread, frees the server. */
void primus_metrics_close(struct primus_metrics* server);

#ifdef __cplusplus
}
#endif

#endif
