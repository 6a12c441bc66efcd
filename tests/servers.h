/* servers.h - servers on loopback for the tests of the remote tier:
 * nginx (WebDAV), redis-server, and the socket helpers of fake servers.
 * Each server is a child process that dies with the test (PDEATHSIG). */
#ifndef JITK_TEST_SERVERS_H
#define JITK_TEST_SERVERS_H

#include <sys/types.h>

typedef struct {
	pid_t pid;
	int port;
	char *dir; /* its files */
	char url[64];
} server;

/* An executable found on PATH or in the sbin directories (where Debian
 * puts nginx and redis-server), or NULL; malloc'd. */
char *find_bin(const char *name);
/* A socket listening on 127.0.0.1:port (0: any free port). */
int listen_on(int port, int backlog);
int port_of(int fd);
/* A port nothing listens on (for a moment: good enough on loopback). */
int free_port(void);
/* A connected socket to 127.0.0.1:port, or -1. */
int connect_to(int port);
/* Wait until the server accepts connections (5 s at most); -1 when it
 * did not, or the process pid exited. */
int wait_port(int port, pid_t pid);
/* Run argv as s's process (its output to /dev/null) and wait for its
 * port; fails the test when it does not start. */
void spawn(server *s, char *const argv[]);
void server_stop(server *s);
/* nginx serving dir/store with WebDAV PUT, one process, as this user;
 * redis-server without persistence. Each returns 1 (after saying so) when
 * the binary is missing: the caller skips. s->url: "http://127.0.0.1:PORT"
 * or "redis://127.0.0.1:PORT". */
int nginx_start(server *s, const char *dir);
int redis_start(server *s, const char *dir);
/* Stop the server and free what s holds. */
void server_free(server *s);

#endif
