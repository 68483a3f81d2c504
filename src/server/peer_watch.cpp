#include "server/peer_watch.h"

#include <sys/socket.h>

#include <cerrno>

namespace tandem::server {

PeerState peek_peer(int fd) {
  for (;;) {
    char c;
    const ssize_t r = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r > 0) return PeerState::kData;
    if (r == 0) return PeerState::kClosed;  // orderly shutdown by the peer
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return PeerState::kIdle;
    return PeerState::kClosed;  // ECONNRESET, ENOTCONN, ...
  }
}

}  // namespace tandem::server
