/* The floor: a single-threaded edge-triggered epoll server that answers every request with a
 * canned "Hello, World!" response without parsing it (it only counts "\r\n\r\n"). Whatever it
 * costs per request is what the kernel and loopback cost on this machine; no real server can
 * be cheaper. With WORKERS above 1 (for the many-core scenarios) it runs that many threads,
 * each with its own SO_REUSEPORT listener and epoll, as nginx and saker spread their workers.
 * Usage: floor PORT [WORKERS] */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char response[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
#define RESPONSE_LEN (sizeof(response) - 1)
#define MAX_FDS 65536
#define BATCH 64
#define WORKERS_MAX 1024

static unsigned char match[MAX_FDS]; /* progress through "\r\n\r\n" per connection */
static char out[BATCH * RESPONSE_LEN];

static int port;
static int reuse_port; /* only with several workers: alone it keeps the port to itself */

/* One worker: its listener, its epoll, its connections (an fd belongs to one worker, so
 * match[] needs no lock). Returns only on a start-up error. */
static void *serve(void *arg) {
    (void)arg;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuse_port) setsockopt(lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 4096)) { perror("listen"); exit(1); }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event events[512];
    char buf[16384];
    for (;;) {
        int n = epoll_wait(ep, events, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= MAX_FDS) { close(c); continue; }
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    match[c] = 0;
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLET, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            for (;;) {
                ssize_t r = read(fd, buf, sizeof buf);
                if (r <= 0) {
                    if (r < 0 && errno == EAGAIN) break;
                    close(fd);
                    break;
                }
                int requests = 0;
                unsigned char m = match[fd];
                for (ssize_t j = 0; j < r; j++) {
                    char want = (m & 1) ? '\n' : '\r';
                    if (buf[j] == want) { if (++m == 4) { requests++; m = 0; } }
                    else m = buf[j] == '\r' ? 1 : 0;
                }
                match[fd] = m;
                while (requests > 0) {
                    int k = requests < BATCH ? requests : BATCH;
                    if (write(fd, out, k * RESPONSE_LEN) < 0) break;
                    requests -= k;
                }
                if ((size_t)r < sizeof buf) break;
            }
        }
    }
}

int main(int argc, char **argv) {
    port = argc > 1 ? atoi(argv[1]) : 8080;
    int workers = argc > 2 ? atoi(argv[2]) : 1;
    if (workers < 1 || workers > WORKERS_MAX) { fprintf(stderr, "floor: WORKERS 1 to %d\n", WORKERS_MAX); return 1; }
    for (int i = 0; i < BATCH; i++) memcpy(out + i * RESPONSE_LEN, response, RESPONSE_LEN);
    reuse_port = workers > 1;
    for (int i = 1; i < workers; i++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, serve, NULL)) { perror("pthread_create"); return 1; }
    }
    serve(NULL);
    return 1;
}
