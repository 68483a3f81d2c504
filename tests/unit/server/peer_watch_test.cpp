// peek_peer, the disconnect watch's test of a socket whose wait for "readable" completed:
// only a closed or reset peer counts as gone. An idle connection (a stale readiness) must
// not: the old rule (readable with 0 bytes available = gone) cancelled live requests.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "server/peer_watch.h"

using tandem::server::peek_peer;
using tandem::server::PeerState;

namespace {

struct Pair {
  int server = -1, client = -1;
  ~Pair() {
    if (server >= 0) ::close(server);
    if (client >= 0) ::close(client);
  }
};

// A connected TCP pair over loopback (what the HTTP server sees).
void tcp_pair(Pair& p) {
  int lst = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lst, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ASSERT_EQ(::bind(lst, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lst, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(lst, reinterpret_cast<sockaddr*>(&a), &len), 0);
  p.client = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(p.client, 0);
  ASSERT_EQ(::connect(p.client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  p.server = ::accept(lst, nullptr, nullptr);
  ::close(lst);
  ASSERT_GE(p.server, 0);
}

// Data and FIN cross loopback asynchronously: poll until the state settles (bounded).
PeerState settle(int fd, PeerState want) {
  PeerState st = peek_peer(fd);
  for (int i = 0; i < 2000 && st != want; ++i) {
    ::usleep(1000);
    st = peek_peer(fd);
  }
  return st;
}

}  // namespace

TEST(PeerWatch, IdleConnectionIsNotAClose) {
  Pair p;
  tcp_pair(p);
  if (HasFatalFailure()) return;
  EXPECT_EQ(peek_peer(p.server), PeerState::kIdle);
}

TEST(PeerWatch, WaitingBytesAreSeenAndLeftInPlace) {
  Pair p;
  tcp_pair(p);
  if (HasFatalFailure()) return;
  ASSERT_EQ(::write(p.client, "GET", 3), 3);
  EXPECT_EQ(settle(p.server, PeerState::kData), PeerState::kData);
  EXPECT_EQ(peek_peer(p.server), PeerState::kData);  // a peek consumes nothing
  char buf[8];
  ASSERT_EQ(::read(p.server, buf, sizeof buf), 3);
  EXPECT_EQ(std::memcmp(buf, "GET", 3), 0);
  EXPECT_EQ(peek_peer(p.server), PeerState::kIdle);
}

TEST(PeerWatch, OrderlyCloseIsAClose) {
  Pair p;
  tcp_pair(p);
  if (HasFatalFailure()) return;
  ::close(p.client);
  p.client = -1;
  EXPECT_EQ(settle(p.server, PeerState::kClosed), PeerState::kClosed);
}

TEST(PeerWatch, BytesBeforeTheCloseComeFirst) {
  Pair p;
  tcp_pair(p);
  if (HasFatalFailure()) return;
  ASSERT_EQ(::write(p.client, "x", 1), 1);
  ::shutdown(p.client, SHUT_WR);
  EXPECT_EQ(settle(p.server, PeerState::kData), PeerState::kData);
  char c;
  ASSERT_EQ(::read(p.server, &c, 1), 1);
  EXPECT_EQ(settle(p.server, PeerState::kClosed), PeerState::kClosed);
}

TEST(PeerWatch, ResetIsAClose) {
  Pair p;
  tcp_pair(p);
  if (HasFatalFailure()) return;
  linger lg{1, 0};  // close() sends RST
  ASSERT_EQ(::setsockopt(p.client, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
  ::close(p.client);
  p.client = -1;
  EXPECT_EQ(settle(p.server, PeerState::kClosed), PeerState::kClosed);
}
