// Beast/Asio live here only (they are slow to compile). One coroutine per connection on its
// own strand; a generation's engine notifier posts to that strand and wakes the coroutine.
#include <utility>  // before Asio's awaitable headers (g++ 12 + Boost 1.74)

#include "server/http_server.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/version.h"
#include "server/byte_stream.h"
#include "server/peer_watch.h"

namespace tandem::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using net::awaitable;
using net::use_awaitable;

namespace {

// Wakes the connection's coroutine from the engine thread. `pending` is only touched on the
// strand, so a notification that lands before the wait is not lost.
struct Signal {
  explicit Signal(net::any_io_executor ex) : timer(ex) {
    timer.expires_at(net::steady_timer::time_point::max());
  }
  net::steady_timer timer;
  bool pending = false;
  bool client_gone = false;
  bool watching = false;  // the disconnect watch runs (drive() clears it when it stops)
};

void peer_gone(Signal& s) {
  s.client_gone = true;
  s.timer.cancel();
}

std::string remote_address(beast::tcp_stream& stream) {
  boost::system::error_code ec;
  auto ep = stream.socket().remote_endpoint(ec);
  return ec ? std::string() : ep.address().to_string();
}

}  // namespace

struct HttpServer::Impl {
  Router& router;
  HttpServerOptions opt;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::atomic<bool> stopping{false};
  // The engine outlives the server (`tandem serve` destroys the server first) and keeps
  // calling the notifiers of live requests while `ioc` shuts down. Every notifier posts
  // through this gate, and ~HttpServer closes it before `ioc` is destroyed, so none touches
  // a strand of a dead io_context; a notifier holds no executor of its own either.
  struct Gate {
    std::mutex mu;
    bool open = true;  // guarded by mu
  };
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();

  Impl(Router& r, HttpServerOptions o) : router(r), opt(std::move(o)) {}

  awaitable<void> accept_loop() {
    for (;;) {
      boost::system::error_code ec;
      tcp::socket sock = co_await acceptor.async_accept(net::make_strand(ioc),
                                                        net::redirect_error(use_awaitable, ec));
      if (ec) {
        if (stopping) co_return;
        continue;
      }
      // Tokens go out the moment they exist: no Nagle delay on small chunks.
      sock.set_option(tcp::no_delay(true), ec);
      auto ex = sock.get_executor();
      net::co_spawn(ex, session(std::move(sock)), net::detached);
    }
  }

  awaitable<void> session(tcp::socket sock) {
    // Shared so that a disconnect watcher completing late never sees a dead stream.
    auto stream_ptr = std::make_shared<beast::tcp_stream>(std::move(sock));
    beast::tcp_stream& stream = *stream_ptr;
    beast::flat_buffer buf;
    boost::system::error_code ec;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(opt.max_body_bytes);
      stream.expires_after(std::chrono::minutes(5));
      co_await http::async_read(stream, buf, parser, net::redirect_error(use_awaitable, ec));
      if (ec == http::error::end_of_stream || ec == net::error::eof) break;
      if (ec) {
        int status = ec == http::error::body_limit ? 413 : 400;
        if (ec != beast::error::timeout && ec != net::error::connection_reset &&
            ec != net::error::operation_aborted) {
          HttpRequest partial;
          if (parser.is_header_done()) {
            partial.method = std::string(parser.get().method_string());
            partial.target = std::string(parser.get().target());
          }
          partial.remote = remote_address(stream);
          HttpResponse r = router.transport_error(
              partial, status, status == 413 ? "request body too large" : "malformed HTTP request");
          co_await write_simple(stream, r, false, false);
          router.complete(r);
        }
        break;
      }
      auto& req = parser.get();
      bool keep = req.keep_alive();
      bool head = req.method() == http::verb::head;
      HttpRequest hr{std::string(req.method_string()), std::string(req.target()),
                     std::move(req.body())};
      for (auto& field : req)
        hr.headers.add(std::string_view(field.name_string().data(), field.name_string().size()),
                       std::string(field.value()));
      hr.remote = remote_address(stream);
      hr.version = int(req.version());
      hr.received = std::chrono::steady_clock::now();

      auto sig = std::make_shared<Signal>(co_await net::this_coro::executor);
      std::weak_ptr<Signal> weak = sig;
      auto notify = [gate = gate, weak] {  // on the engine thread
        std::lock_guard lock(gate->mu);
        if (!gate->open) return;
        auto s = weak.lock();
        if (!s) return;
        net::post(s->timer.get_executor(), [weak] {
          if (auto s = weak.lock()) {
            s->pending = true;
            s->timer.cancel();
          }
        });
      };
      HttpResponse res = router.handle(hr, notify);
      bool ok;
      if (res.source) {
        ok = co_await drive_source(stream_ptr, res, sig, keep);
        router.complete(res, sig->client_gone ? "cancelled" : nullptr);
      } else if (!res.gen) {
        ok = co_await write_simple(stream, res, keep, head);
        router.complete(res, nullptr);
      } else {
        ok = co_await drive(stream_ptr, res, sig, keep);
        router.complete(res, sig->client_gone ? "cancelled" : nullptr);
      }
      if (!ok || !keep) break;
    }
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  awaitable<bool> write_simple(beast::tcp_stream& stream, HttpResponse& r, bool keep, bool head) {
    r.record.status = r.status;
    http::response<http::string_body> res{http::status(r.status), 11};
    res.set(http::field::server, "tandem/" TANDEM_VERSION);
    res.set(http::field::content_type, r.content_type);
    for (auto& [name, value] : r.headers.items) res.insert(name, value);
    if (r.status == 429 && !r.headers.has("retry-after")) res.set(http::field::retry_after, "1");
    res.keep_alive(keep);
    if (head) {
      res.content_length(r.body.size());
    } else {
      r.record.bytes_out += r.body.size();
      res.body() = r.body;  // kept: the request record reads an error message from it
      res.prepare_payload();
    }
    boost::system::error_code ec;
    stream.expires_after(std::chrono::seconds(60));
    if (head) {
      http::response_serializer<http::string_body> sr{res};
      co_await http::async_write_header(stream, sr, net::redirect_error(use_awaitable, ec));
    } else {
      co_await http::async_write(stream, res, net::redirect_error(use_awaitable, ec));
    }
    co_return !ec;
  }

  // Watches the socket while a generation runs, so that a client that goes away has its
  // generation cancelled at once. A completed wait only says "look": it can also be a stale
  // readiness (the request's own bytes, already read), so the socket is peeked. Closed or
  // reset: cancel. Idle: wait again. Data (a pipelined request): stop watching, the bytes
  // stay for the next read. (Taking "readable with 0 bytes available" for a close made a
  // loaded server drop a live request without a response: curl saw status 000.)
  static void watch_disconnect(std::shared_ptr<beast::tcp_stream> stream,
                               std::shared_ptr<Signal> sig) {
    auto& sock = stream->socket();
    sock.async_wait(tcp::socket::wait_read, [stream, sig](boost::system::error_code ec) {
      if (ec == net::error::operation_aborted || !sig->watching) return;
      const PeerState st = ec ? PeerState::kClosed : peek_peer(stream->socket().native_handle());
      if (st == PeerState::kIdle)
        watch_disconnect(stream, sig);
      else if (st == PeerState::kClosed)
        peer_gone(*sig);
    });
    // A close that landed before the wait was registered need not wake it: look now too.
    if (peek_peer(sock.native_handle()) == PeerState::kClosed) peer_gone(*sig);
  }

  awaitable<void> wait(Signal& sig) {
    if (sig.pending || sig.client_gone) co_return;
    boost::system::error_code ec;
    sig.timer.expires_at(net::steady_timer::time_point::max());
    co_await sig.timer.async_wait(net::redirect_error(use_awaitable, ec));
  }

  awaitable<bool> drive(std::shared_ptr<beast::tcp_stream> stream_ptr, HttpResponse& r,
                        std::shared_ptr<Signal> sig, bool keep) {
    beast::tcp_stream& stream = *stream_ptr;
    Signal& sig_ref = *sig;
    // Events may have arrived before the notifier was installed: poll once at the start.
    sig_ref.pending = true;
    boost::system::error_code ec;
    Generation& g = *r.gen;
    Formatter& f = *r.fmt;
    std::vector<ChoiceDelta> deltas;
    bool done = false;
    sig_ref.watching = true;
    watch_disconnect(stream_ptr, sig);

    if (!r.stream) {
      while (!done) {
        co_await wait(sig_ref);
        if (sig_ref.client_gone) break;
        sig_ref.pending = false;
        deltas.clear();
        done = g.poll(deltas);
        for (auto& d : deltas) f.delta(d);
      }
      sig_ref.watching = false;
      stream.socket().cancel(ec);  // stop the watcher
      if (!done) {
        g.cancel();
        co_return false;
      }
      Router::finish_body(r);
      co_return co_await write_simple(stream, r, keep, false);
    }

    r.record.status = 200;
    http::response<http::empty_body> head{http::status::ok, 11};
    head.set(http::field::server, "tandem/" TANDEM_VERSION);
    head.set(http::field::content_type, r.content_type);
    head.set(http::field::cache_control, "no-cache");
    for (auto& [name, value] : r.headers.items) head.insert(name, value);
    head.keep_alive(keep);
    head.chunked(true);
    http::response_serializer<http::empty_body> sr{head};
    stream.expires_after(std::chrono::seconds(60));
    co_await http::async_write_header(stream, sr, net::redirect_error(use_awaitable, ec));
    if (ec) {
      sig_ref.watching = false;
      stream.socket().cancel(ec);
      g.cancel();
      co_return false;
    }
    std::string out = f.start();
    while (!ec) {
      if (!out.empty()) {
        stream.expires_after(std::chrono::seconds(60));
        r.record.bytes_out += out.size();
        co_await net::async_write(stream, http::make_chunk(net::buffer(out)),
                                  net::redirect_error(use_awaitable, ec));
        out.clear();
        if (ec) break;
      }
      if (done) break;
      co_await wait(sig_ref);
      if (sig_ref.client_gone) break;
      sig_ref.pending = false;
      deltas.clear();
      done = g.poll(deltas);
      for (auto& d : deltas) out += f.delta(d);
      if (done) {
        if (!g.error().empty()) out += f.stream_error(g.error());
        out += f.finish(g.totals());
      }
    }
    sig_ref.watching = false;
    stream.socket().cancel(ec);
    if (!done || sig_ref.client_gone) {
      g.cancel();
      co_return false;
    }
    boost::system::error_code wec;
    co_await net::async_write(stream, http::make_chunk_last(),
                              net::redirect_error(use_awaitable, wec));
    co_return !wec;
  }
  // A ByteStream response: chunks as the source has bytes; a client that goes away closes it.
  awaitable<bool> drive_source(std::shared_ptr<beast::tcp_stream> stream_ptr, HttpResponse& r,
                               std::shared_ptr<Signal> sig, bool keep) {
    beast::tcp_stream& stream = *stream_ptr;
    Signal& s = *sig;
    ByteStream& src = *r.source;
    r.record.status = r.status;
    s.pending = true;
    s.watching = true;
    watch_disconnect(stream_ptr, sig);
    http::response<http::empty_body> head{http::status(r.status), 11};
    head.set(http::field::server, "tandem/" TANDEM_VERSION);
    head.set(http::field::content_type, r.content_type);
    head.set(http::field::cache_control, "no-cache");
    for (auto& [name, value] : r.headers.items) head.insert(name, value);
    head.keep_alive(keep);
    head.chunked(true);
    http::response_serializer<http::empty_body> sr{head};
    boost::system::error_code ec;
    stream.expires_after(std::chrono::seconds(60));
    co_await http::async_write_header(stream, sr, net::redirect_error(use_awaitable, ec));
    std::string out;
    bool done = false;
    while (!ec) {
      if (!out.empty()) {
        stream.expires_after(std::chrono::seconds(60));
        co_await net::async_write(stream, http::make_chunk(net::buffer(out)),
                                  net::redirect_error(use_awaitable, ec));
        out.clear();
        if (ec) break;
      }
      if (done) break;
      co_await wait(s);
      if (s.client_gone) break;
      s.pending = false;
      done = src.poll(out);
    }
    s.watching = false;
    stream.socket().cancel(ec);
    src.close();
    if (!done || s.client_gone) co_return false;
    boost::system::error_code wec;
    co_await net::async_write(stream, http::make_chunk_last(),
                              net::redirect_error(use_awaitable, wec));
    co_return !wec;
  }
};

HttpServer::HttpServer(Router& router, HttpServerOptions opt)
    : impl_(std::make_unique<Impl>(router, std::move(opt))) {
  auto& a = impl_->acceptor;
  boost::system::error_code ec;
  // An IP address, or a name such as "localhost" (its first address).
  tcp::endpoint ep;
  auto addr = net::ip::make_address(impl_->opt.host, ec);
  if (!ec) {
    ep = tcp::endpoint(addr, static_cast<unsigned short>(impl_->opt.port));
  } else {
    tcp::resolver resolver(impl_->ioc);
    auto found = resolver.resolve(impl_->opt.host, std::to_string(impl_->opt.port), ec);
    if (ec || found.empty())
      fail(ErrorKind::kInvalidArgument, "--host '{}' is neither an IP address nor a known name",
           impl_->opt.host);
    ep = found.begin()->endpoint();
  }
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    fail(ErrorKind::kIo, "cannot listen on {}:{}: {}", impl_->opt.host, impl_->opt.port,
         ec.message());
}

HttpServer::~HttpServer() {
  stop();
  std::lock_guard lock(impl_->gate->mu);  // no notifier posts from here on
  impl_->gate->open = false;
}

int HttpServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::run() {
  net::co_spawn(impl_->acceptor.get_executor(), impl_->accept_loop(), net::detached);
  net::signal_set signals(impl_->ioc);
  if (impl_->opt.stop_on_signals) {
    signals.add(SIGINT);
    signals.add(SIGTERM);
    signals.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec) return;
      spdlog::info("signal {}: stopping", sig);
      stop();
    });
  }
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->opt.threads; ++i) threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->ioc.run();
  for (auto& t : threads) t.join();
}

void HttpServer::stop() {
  if (impl_->stopping.exchange(true)) return;
  impl_->ioc.stop();
}

}  // namespace tandem::server
