/* The WebSocket floor: a single-threaded edge-triggered epoll server that echoes every client
 * frame as an unmasked server frame and does nothing else. It answers the upgrade with a fixed
 * 101 response (it neither checks the request nor computes Sec-WebSocket-Accept: the load
 * generator does not check it), handles payloads below 64 KiB, no fragmentation, no control
 * frames, no UTF-8 check. Whatever it costs per message is what the kernel and loopback cost
 * on this machine; no real server can be cheaper. Usage: floor PORT */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char upgrade[] =
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
#define MAX_FDS 4096
#define IN_MAX (1 << 20)

struct conn {
    int upgraded;
    unsigned char match; /* progress through "\r\n\r\n" before the upgrade */
    size_t have;         /* bytes of an incomplete frame kept in `in` */
    unsigned char *in;
};

static struct conn conns[MAX_FDS];
static unsigned char out[IN_MAX + 4096];

/* Echoes the complete frames in c->in[0..have); keeps an incomplete one. Returns the output
 * length, or -1 for a frame it does not handle. */
static ssize_t echo(struct conn *c) {
    size_t at = 0, n = 0;
    for (;;) {
        size_t left = c->have - at;
        if (left < 2) break;
        unsigned char *f = c->in + at;
        size_t len = f[1] & 0x7f, header = 2;
        if (len == 127) return -1;
        if (len == 126) {
            if (left < 4) break;
            len = ((size_t)f[2] << 8) | f[3];
            header = 4;
        }
        if (left < header + 4 + len) break;
        const unsigned char *mask = f + header;
        const unsigned char *payload = mask + 4;
        out[n++] = 0x80 | (f[0] & 0x0f);
        if (len < 126) {
            out[n++] = (unsigned char)len;
        } else {
            out[n++] = 126;
            out[n++] = (unsigned char)(len >> 8);
            out[n++] = (unsigned char)len;
        }
        for (size_t i = 0; i < len; i++) out[n + i] = payload[i] ^ mask[i & 3];
        n += len;
        at += header + 4 + len;
    }
    memmove(c->in, c->in + at, c->have - at);
    c->have -= at;
    return (ssize_t)n;
}

static void drop(int fd) {
    free(conns[fd].in);
    memset(&conns[fd], 0, sizeof conns[fd]);
    close(fd);
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 8080;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 4096)) { perror("listen"); return 1; }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event events[512];
    for (;;) {
        int n = epoll_wait(ep, events, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= MAX_FDS) { close(c); continue; }
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conns[c].in = malloc(IN_MAX);
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLET, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            struct conn *c = &conns[fd];
            for (;;) {
                size_t room = IN_MAX - c->have;
                ssize_t r = read(fd, c->in + c->have, room);
                if (r <= 0) {
                    if (r < 0 && errno == EAGAIN) break;
                    drop(fd);
                    break;
                }
                if (!c->upgraded) {
                    /* The request head ends at the first "\r\n\r\n"; clients send nothing
                     * after it before the 101 arrives. */
                    for (ssize_t j = 0; j < r && c->match < 4; j++) {
                        unsigned char b = c->in[j];
                        c->match = (b == "\r\n\r\n"[c->match]) ? c->match + 1 : (b == '\r');
                    }
                    if (c->match == 4) {
                        c->upgraded = 1;
                        if (write(fd, upgrade, sizeof upgrade - 1) < 0) { drop(fd); break; }
                    }
                    if ((size_t)r < room) break;
                    continue;
                }
                c->have += (size_t)r;
                ssize_t len = echo(c);
                if (len < 0 || (len > 0 && write(fd, out, (size_t)len) != len)) { drop(fd); break; }
                if (c->have == IN_MAX) { drop(fd); break; }
                /* A short read emptied the socket: the next data brings a new edge, so no
                 * read that can only say EAGAIN. */
                if ((size_t)r < room) break;
            }
        }
    }
}
