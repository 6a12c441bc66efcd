/* servers.c - servers on loopback for the tests (servers.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "servers.h"
#include "base/internal.h"

/* An executable found on PATH or in the sbin directories (where Debian
 * puts nginx and redis-server), or NULL. */
char *find_bin(const char *name)
{
	const char *path = getenv("PATH");
	char *dirs = jitk__asprintf("%s:/usr/sbin:/usr/local/sbin:/sbin", path ? path : "/usr/bin"), *d,
	     *save = NULL, *found = NULL;

	for (d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char *p = jitk__asprintf("%s/%s", d, name);

		if (!access(p, X_OK))
			found = p;
		else
			free(p);
	}
	free(dirs);
	return found;
}

int listen_on(int port, int backlog)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	return fd;
}

int port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	return ntohs(a.sin_port);
}

/* A port nothing listens on (for a moment: good enough on loopback). */
int free_port(void)
{
	int fd = listen_on(0, 1), port = port_of(fd);

	close(fd);
	return port;
}

int connect_to(int port)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Wait until the server accepts connections (5 s at most). */
int wait_port(int port, pid_t pid)
{
	double t0 = jitk__now_ms();

	while (jitk__now_ms() - t0 < 5000) {
		int fd = connect_to(port), st;

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (pid > 0 && waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		usleep(10000);
	}
	return -1;
}

void server_stop(server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
}

void spawn(server *s, char *const argv[])
{
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		int null = open("/dev/null", O_RDWR);

		/* a failed test must not leave a server behind (holding the
		 * test runner's output pipe open) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	if (wait_port(s->port, s->pid)) {
		server_stop(s);
		fail_msg("%s did not start on port %d", argv[0], s->port);
	}
}

/* nginx serving dir/store with WebDAV PUT, one process, as this user. 1
 * when nginx is missing (skip). */
int nginx_start(server *s, const char *dir)
{
	char *bin = find_bin("nginx"), *conf, *store, *body;
	char *argv[8];

	memset(s, 0, sizeof(*s));
	if (!bin) {
		fprintf(stderr, "skipped: nginx not found (apt-get install nginx-light)\n");
		return 1;
	}
	s->dir = jitk__strdup(dir);
	s->port = free_port();
	store = t_path(dir, "store");
	body = t_path(dir, "body");
	assert_int_equal(jitk__mkdirs(store, 0755), 0);
	assert_int_equal(jitk__mkdirs(body, 0700), 0);
	conf = t_path(dir, "nginx.conf");
	t_writef(conf,
		 "daemon off;\nmaster_process off;\nworker_processes 1;\npid %s/nginx.pid;\n"
		 "error_log %s/error.log;\nevents { worker_connections 1024; }\n"
		 "http {\n  access_log off;\n  client_body_temp_path %s;\n  proxy_temp_path %s;\n"
		 "  fastcgi_temp_path %s;\n  uwsgi_temp_path %s;\n  scgi_temp_path %s;\n"
		 "  server {\n    listen 127.0.0.1:%d;\n    root %s;\n    client_max_body_size 512m;\n"
		 "    location / {\n      dav_methods PUT;\n      create_full_put_path on;\n"
		 "      dav_access user:rw group:r all:r;\n      log_not_found off;\n    }\n  }\n}\n",
		 dir, dir, body, body, body, body, body, s->port, store);
	argv[0] = bin;
	argv[1] = "-p";
	argv[2] = s->dir;
	argv[3] = "-c";
	argv[4] = conf;
	argv[5] = NULL;
	spawn(s, argv);
	snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", s->port);
	free(conf);
	free(store);
	free(body);
	free(bin);
	return 0;
}

/* redis-server on a free port, no persistence. 1 when missing (skip). */
int redis_start(server *s, const char *dir)
{
	char *bin = find_bin("redis-server"), port[16];
	char *argv[16];

	memset(s, 0, sizeof(*s));
	if (!bin) {
		fprintf(stderr, "skipped: redis-server not found (apt-get install redis-server)\n");
		return 1;
	}
	s->dir = jitk__strdup(dir);
	s->port = free_port();
	snprintf(port, sizeof(port), "%d", s->port);
	argv[0] = bin;
	argv[1] = "--port";
	argv[2] = port;
	argv[3] = "--bind";
	argv[4] = "127.0.0.1";
	argv[5] = "--save";
	argv[6] = "";
	argv[7] = "--appendonly";
	argv[8] = "no";
	argv[9] = "--dir";
	argv[10] = s->dir;
	argv[11] = "--protected-mode";
	argv[12] = "no";
	argv[13] = NULL;
	spawn(s, argv);
	snprintf(s->url, sizeof(s->url), "redis://127.0.0.1:%d", s->port);
	free(bin);
	return 0;
}

void server_free(server *s)
{
	server_stop(s);
	free(s->dir);
	s->dir = NULL;
}
