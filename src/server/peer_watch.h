#pragma once
// What a connection's readiness means while its response is being generated (the disconnect
// watch in http_server.cpp). A wait for "readable" can complete with nothing to read: the
// readiness may be stale (data that the request read already consumed). Only a peek tells
// a closed peer from an idle one.

namespace tandem::server {

enum class PeerState {
  kIdle,    // connected, nothing to read: keep watching
  kData,    // bytes waiting (a pipelined request): they stay for the next read
  kClosed,  // the peer closed or reset the connection
};

// Peeks at a connected socket without blocking or consuming anything.
PeerState peek_peer(int fd);

}  // namespace tandem::server
