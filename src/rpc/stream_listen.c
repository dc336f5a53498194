/* The listening socket of a stream edge: see stream_listen.h. */
#include "rpc/stream_listen.h"

#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crescent/error.h"

int cr_stream_listen(const struct cr_stream_listen *spec, int *fd_out, bool *default_busy) {
    assert(spec != NULL && spec->address != NULL && fd_out != NULL && default_busy != NULL);
    *fd_out = -1;
    *default_busy = false;
    char host[256];
    const char *address = spec->address, *colon = strrchr(address, ':');
    size_t hl = colon != NULL ? (size_t)(colon - address) : 0;
    if (hl >= 2 && address[0] == '[' && address[hl - 1] == ']') address++, hl -= 2;
    if (colon == NULL || hl == 0 || hl >= sizeof(host) || colon[1] == '\0') {
        fprintf(stderr, "crescentd: %s '%s' is not HOST:PORT\n", spec->flag, spec->address);
        return CR_ERR_INVALID_PARAMS;
    }
    memcpy(host, address, hl);
    host[hl] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "crescentd: cannot serve the %s on %s: %s\n", spec->what, spec->address,
                gai_strerror(gai));
        return CR_ERR_IO;
    }
    if (spec->accept_address != NULL &&
        !spec->accept_address(ai->ai_addr, spec->address, spec->arg)) {
        freeaddrinfo(ai);
        return CR_ERR_INVALID_PARAMS;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        int err = errno;
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        /* The default address is best effort: another crescentd on this host
         * must not fail to start because the first took it. */
        if (err == EADDRINUSE && spec->default_address != NULL &&
            strcmp(spec->address, spec->default_address) == 0) {
            *default_busy = true;
            return CR_OK;
        }
        fprintf(stderr, "crescentd: cannot bind the %s address %s: %s\n", spec->what,
                spec->address, strerror(err));
        return CR_ERR_IO;
    }
    freeaddrinfo(ai);
    *fd_out = fd;
    return CR_OK;
}
