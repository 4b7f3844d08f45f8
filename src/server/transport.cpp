// The HTTP transport (transport.hpp) on Boost.Beast's request parser and Asio: the only translation unit of the
// project that includes Beast or Asio (they are header-only and slow to compile).
//
// Parsing is sans-I/O (Exchange: bytes in, a request's events out), so that a socket's connection and serve_bytes()
// (the fuzz harness's entry) run the same code. Beast's parser reads the header only once all of it is buffered,
// and the buffer holds at most max_header_bytes: the header never costs more. The body goes into a std::string that
// the request then owns; its growth is asked of the routes (admit_body) before it happens.
#include "server/transport.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstring>
#include <future>
#include <limits>
#include <mutex>
#include <thread>

// GCC 12 reports Boost 1.74's optional body limit in Beast's parser as maybe used uninitialized once it is inlined
// here (-O2 with the sanitizers: a false positive in the library's header, not in this file's code). The late
// warnings use the header's locations, so this comes before the includes.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : fields) {
    if (k.size() != name.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < k.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(k[i])) == std::tolower(static_cast<unsigned char>(name[i]));
    if (same) return v;
  }
  return {};
}

namespace {

// Bytes read from a client and not parsed yet, contiguous (Beast's parser wants that), of a fixed capacity.
class ReadBuffer {
 public:
  explicit ReadBuffer(std::size_t capacity) : buf_(capacity) {}
  std::string_view data() const { return {buf_.data() + begin_, end_ - begin_}; }
  std::size_t size() const { return end_ - begin_; }
  bool full() const { return size() == buf_.size(); }
  void consume(std::size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  // The free space at the end, after moving the unparsed bytes to the front.
  std::pair<char*, std::size_t> space() {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, size());
      end_ -= begin_;
      begin_ = 0;
    }
    return {buf_.data() + end_, buf_.size() - end_};
  }
  void commit(std::size_t n) { end_ += n; }

 private:
  std::vector<char> buf_;
  std::size_t begin_ = 0, end_ = 0;
};

constexpr std::size_t kReadChunk = 64 << 10;

// One connection's parsing, request after request: bytes in (buffer().space() / commit()), events out (advance()).
class Exchange {
 public:
  enum class Event {
    NeedMore,  // read more bytes
    Header,    // request() has the header: the routes decide, then accept_body() (or the caller answers)
    Request,   // take() the complete request
    Refuse,    // the transport refuses the request: refusal(); the connection closes after the answer
  };
  struct Refusal {
    int status = 400;
    std::string type, message;
  };

  explicit Exchange(const TransportLimits& limits)
      : limits_(limits), buf_(std::max<std::size_t>(limits.max_header_bytes + 4, kReadChunk)) {
    reset();
  }

  ReadBuffer& buffer() { return buf_; }
  HttpRequest& request() { return req_; }
  const Refusal& refusal() const { return refusal_; }
  bool in_body() const { return phase_ == Phase::Body; }
  bool keep_alive() const { return keep_alive_; }
  bool expects_continue() const { return expect_continue_; }

  Event advance() {
    for (;;) {
      switch (phase_) {
        case Phase::Header: return header();
        case Phase::HeaderDone: return Event::Header;  // waiting for accept_body()
        case Phase::Body: return body();
        case Phase::Done: return Event::Request;
        case Phase::Refused: return Event::Refuse;
      }
    }
  }

  // After Event::Header: read the body (asking request().admit_body for its memory).
  void accept_body() {
    if (phase_ != Phase::HeaderDone) return;
    phase_ = parser_->is_done() ? Phase::Done : Phase::Body;
    if (phase_ == Phase::Done) return;
    parser_->body_limit(limits_.max_body_bytes);
    parser_->eager(true);
    if (req_.content_length && req_.admit_body && !req_.admit_body(*req_.content_length))
      refuse(503, "Overloaded",
             "the request body of " + std::to_string(*req_.content_length) +
                 " bytes does not fit the memory budget now (--memory-budget-mb); retry later");
  }

  HttpRequest take() {
    req_.body = std::move(parser_->get().body());
    req_.complete = Clock::now();
    return std::move(req_);
  }

  // Ready for the connection's next request (the unparsed bytes stay).
  void reset() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    // Checked by header() against the declared size, then set for the body. (Not boost::none: Beast 1.74 compares
    // a Content-Length with the optional, and any number is over an empty one.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    parser_->eager(false);  // stop after the header: the routes decide before any body byte is taken
    req_ = HttpRequest{};
    refusal_ = {};
    phase_ = Phase::Header;
    header_taken_ = 0;
    keep_alive_ = false;
    expect_continue_ = false;
  }

  // A refusal found outside the parser (a timeout): the connection answers it and closes.
  void refuse(int status, std::string type, std::string message) {
    refusal_ = {status, std::move(type), std::move(message)};
    phase_ = Phase::Refused;
  }

 private:
  enum class Phase { Header, HeaderDone, Body, Done, Refused };

  Event header() {
    // RFC 9112 §2.2: empty lines before a request line are ignored (a client's CRLF after a body).
    while (header_taken_ == 0 && buf_.size() > 0 && (buf_.data()[0] == '\r' || buf_.data()[0] == '\n')) buf_.consume(1);
    const std::string_view data = buf_.data();
    if (data.empty()) return Event::NeedMore;
    // The request line on its own limit (414) before the whole header's (431). Beast takes the request line and
    // each complete field as it parses them (and checks its header_limit against what is left only), so the line is
    // at the front until something was taken, and the header's bytes are counted here.
    if (header_taken_ == 0) {
      const std::size_t eol = data.find('\n');
      std::size_t line = eol == std::string_view::npos ? data.size() : eol;
      if (eol != std::string_view::npos && eol > 0 && data[eol - 1] == '\r') --line;
      if (line > limits_.max_request_line_bytes) {
        refuse(414, "UriTooLong",
               "the request line is over the limit of " + std::to_string(limits_.max_request_line_bytes) +
                   " bytes (max_request_line_bytes)");
        return Event::Refuse;
      }
    }
    error_code ec;
    const std::size_t used = parser_->put(net::buffer(data.data(), data.size()), ec);
    buf_.consume(used);
    header_taken_ += used;
    if (!ec && header_taken_ > limits_.max_header_bytes) ec = http::error::header_limit;
    if (ec == http::error::need_more) {
      if (header_taken_ + buf_.size() < limits_.max_header_bytes && !buf_.full()) return Event::NeedMore;
      ec = http::error::header_limit;
    }
    if (ec == http::error::header_limit) {
      refuse(431, "HeaderFieldsTooLarge",
             "the request line and header fields are over the limit of " + std::to_string(limits_.max_header_bytes) +
                 " bytes (max_header_bytes)");
      return Event::Refuse;
    }
    if (ec) {
      refuse(400, "BadRequest", "malformed HTTP request: " + ec.message());
      return Event::Refuse;
    }
    if (!parser_->is_header_done()) return Event::NeedMore;
    const auto& m = parser_->get();
    req_.method = std::string(m.method_string());
    req_.target = std::string(m.target());
    const std::size_t q = req_.target.find('?');
    req_.path = req_.target.substr(0, q);
    req_.query = q == std::string::npos ? std::string() : req_.target.substr(q + 1);
    req_.version = m.version();
    for (const auto& f : m) req_.fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
    req_.chunked = parser_->chunked();
    if (const auto length = parser_->content_length()) req_.content_length = *length;
    req_.arrived = Clock::now();
    keep_alive_ = parser_->keep_alive();
    expect_continue_ = req_.version >= 11 && req_.has_body() && !req_.header("Expect").empty();
    phase_ = Phase::HeaderDone;
    if (req_.content_length && *req_.content_length > limits_.max_body_bytes) {
      refuse(413, "TooLarge", body_limit_message());
      return Event::Refuse;
    }
    return Event::Header;
  }

  Event body() {
    if (parser_->is_done()) {
      phase_ = Phase::Done;
      return Event::Request;
    }
    const std::string_view data = buf_.data();
    if (data.empty()) return Event::NeedMore;
    if (req_.chunked && !reserve(data.size())) return Event::Refuse;
    error_code ec;
    const std::size_t used = parser_->put(net::buffer(data.data(), data.size()), ec);
    buf_.consume(used);
    if (ec == http::error::need_more) {
      if (used == 0 && buf_.full()) {  // a chunk header or the trailer does not fit the buffer
        refuse(400, "BadRequest",
               "a chunk header or the trailer of the chunked body is over " + std::to_string(data.size()) + " bytes");
        return Event::Refuse;
      }
      return parser_->is_done() ? (phase_ = Phase::Done, Event::Request) : Event::NeedMore;
    }
    if (ec == http::error::body_limit) {
      refuse(413, "TooLarge", body_limit_message());
      return Event::Refuse;
    }
    if (ec) {
      refuse(400, "BadRequest", "malformed HTTP request body: " + ec.message());
      return Event::Refuse;
    }
    if (parser_->is_done()) {
      phase_ = Phase::Done;
      return Event::Request;
    }
    return Event::NeedMore;
  }

  // A chunked body may grow by up to `incoming` bytes in the next put: its string's capacity grows first (doubling,
  // at most to the body limit), with the routes' permission for the memory.
  bool reserve(std::size_t incoming) {
    std::string& b = parser_->get().body();
    const std::uint64_t needed = b.size() + incoming;
    if (needed <= b.capacity()) return true;
    const std::uint64_t grown = std::max<std::uint64_t>({needed, 2 * std::uint64_t{b.capacity()}, kReadChunk});
    const std::uint64_t cap = std::min<std::uint64_t>(grown, limits_.max_body_bytes);
    if (cap <= b.capacity()) return true;  // at the limit: the parser refuses more than that
    if (req_.admit_body && !req_.admit_body(cap)) {
      refuse(503, "Overloaded",
             "the chunked request body (" + std::to_string(b.size()) +
                 " bytes so far) does not fit the memory budget now (--memory-budget-mb); retry later");
      return false;
    }
    b.reserve(static_cast<std::size_t>(cap));
    return true;
  }

  std::string body_limit_message() const {
    return "the request body is over the limit of " + std::to_string(limits_.max_body_bytes) +
           " bytes (max_body_bytes, --max-body-mb)";
  }

  const TransportLimits& limits_;
  ReadBuffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest req_;
  Refusal refusal_;
  Phase phase_ = Phase::Header;
  std::size_t header_taken_ = 0;  // header bytes the parser took so far
  bool keep_alive_ = false;
  bool expect_continue_ = false;
};

// The status line and header fields of an answer with a body of `length` bytes (sent or, for HEAD, not).
std::string response_head(const HttpResponse& r, unsigned version, bool close, std::size_t length) {
  const auto status = http::int_to_status(static_cast<unsigned>(r.status));
  std::string h = version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  h += std::to_string(r.status);
  h += ' ';
  h += std::string(http::obsolete_reason(status));
  h += "\r\nContent-Type: " + r.content_type + "\r\nContent-Length: " + std::to_string(length) + "\r\n";
  for (const auto& [k, v] : r.fields) {
    std::string value = v;  // our own values; a CR or LF would end the field early
    value.erase(std::remove_if(value.begin(), value.end(), [](char c) { return c == '\r' || c == '\n'; }), value.end());
    h += k + ": " + value + "\r\n";
  }
  if (close)
    h += "Connection: close\r\n";
  else if (version == 10)
    h += "Connection: keep-alive\r\n";
  h += "\r\n";
  return h;
}

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What the listener and its connections share (kept alive by the connections).
struct Shared {
  Shared(TransportLimits l, HttpRoutes& r) : limits(l), routes(r) {}
  const TransportLimits limits;
  HttpRoutes& routes;
  std::atomic<bool> stopping{false};
  std::function<void()> closed;  // a connection closed (the listener may accept again)
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<Shared> shared)
      : sock_(std::move(socket)), timer_(sock_.get_executor()), shared_(std::move(shared)), ex_(shared_->limits) {}

  void start() {
    idle_since_ = Clock::now();
    net::dispatch(sock_.get_executor(), [self = shared_from_this()] { self->serve(); });
  }

 private:
  // Parses what is buffered and acts on it; reads when more is needed.
  void serve() {
    for (;;) {
      if (closed_) return;
      switch (ex_.advance()) {
        case Exchange::Event::NeedMore: return read();
        case Exchange::Event::Header: {
          HttpRequest& r = ex_.request();
          begun_ = true;
          arrived_ = r.arrived;
          path_ = r.path;
          head_only_ = r.method == "HEAD";
          version_ = r.version;
          shared_->routes.on_begin();
          if (std::optional<HttpResponse> early = shared_->routes.on_header(r)) {
            const bool unread = r.has_body();  // the body stays unread: close after the answer
            return answer(std::move(*early), unread, unread);
          }
          body_start_ = Clock::now();
          ex_.accept_body();
          if (ex_.expects_continue() && ex_.in_body()) return write_continue();
          continue;
        }
        case Exchange::Event::Request: {
          auto self = shared_from_this();
          shared_->routes.on_request(ex_.take(), Responder([self](HttpResponse&& resp) {
                                       net::post(self->sock_.get_executor(), [self, resp = std::move(resp)]() mutable {
                                         const bool close = resp.close;
                                         self->answer(std::move(resp), close, false);
                                       });
                                     }));
          return;  // nothing more is read until the answer is written
        }
        case Exchange::Event::Refuse: {
          const Exchange::Refusal& f = ex_.refusal();
          if (!begun_) path_ = ex_.request().path;
          // The client may still be sending (the rest of a line, a body): linger so that it sees the answer.
          return answer(shared_->routes.refusal(f.status, f.type, f.message), true, true);
        }
      }
    }
  }

  // The deadline of the read in progress, and whether missing it answers 408 (a request started) or closes quietly.
  std::pair<Clock::time_point, bool> read_deadline() const {
    const TransportLimits& l = shared_->limits;
    const auto now = Clock::now();
    if (!started_) return {idle_since_ + l.idle_timeout, false};
    if (ex_.in_body()) return {std::min(body_start_ + l.body_timeout, now + l.read_timeout), true};
    return {std::min(request_start_ + l.header_timeout, now + l.read_timeout), true};
  }

  void read() {
    auto [p, n] = ex_.buffer().space();
    if (n == 0) return close();             // cannot happen: a full buffer is refused by the exchange
    const auto deadline = read_deadline();  // (no structured binding: clang 14 cannot capture those)
    const bool answers = deadline.second;
    arm(deadline.first);
    sock_.async_read_some(net::buffer(p, n), [self = shared_from_this(), answers](error_code ec, std::size_t got) {
      const bool late = self->disarm();
      if (ec == net::error::operation_aborted && late) {
        if (!answers || self->closed_) return self->close();
        const bool body = self->ex_.in_body();
        self->ex_.refuse(408, "Timeout",
                         std::string("the client sent ") + (body ? "the body" : "the request line and headers") +
                             " too slowly (header_timeout_s, body_timeout_s, read_timeout_s)");
        return self->serve();
      }
      if (ec) return self->close();  // the client went (or reset): nothing to answer
      self->ex_.buffer().commit(got);
      if (!self->started_ && got > 0) {
        self->started_ = true;
        self->request_start_ = Clock::now();
      }
      self->serve();
    });
  }

  void arm(Clock::time_point deadline) {
    const unsigned gen = ++timer_gen_;
    timer_.expires_at(deadline);
    timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->timed_out_ = true;
      error_code ignored;
      self->sock_.cancel(ignored);
    });
  }

  // Stops the timer; true when it had fired for the operation that just completed.
  bool disarm() {
    ++timer_gen_;
    timer_.cancel();
    return std::exchange(timed_out_, false);
  }

  void write_continue() {
    arm(Clock::now() + shared_->limits.write_timeout);
    net::async_write(sock_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = shared_from_this()](error_code ec, std::size_t) {
                       self->disarm();
                       if (ec) return self->close();
                       self->serve();
                     });
  }

  void answer(HttpResponse&& r, bool close, bool linger) {
    if (closed_) return finish(0);
    if (r.status == 0) {  // the routes dropped the request
      finish(0);
      return close_now();
    }
    status_ = r.status;
    hold_ = std::move(r.hold);
    close_after_ = close || r.close || !ex_.keep_alive() || shared_->stopping;
    linger_after_ = linger;
    head_ = response_head(r, version_, close_after_, r.body.size());
    body_ = head_only_ ? std::string() : std::move(r.body);
    written_ = 0;
    write();
  }

  // Writes what is left of head_ + body_, each write within write_timeout.
  void write() {
    const std::size_t total = head_.size() + body_.size();
    if (written_ == total) return written();
    std::array<net::const_buffer, 2> bufs;
    if (written_ < head_.size()) {
      bufs[0] = net::buffer(head_.data() + written_, head_.size() - written_);
      bufs[1] = net::buffer(body_.data(), body_.size());
    } else {
      bufs[0] = net::buffer(body_.data() + (written_ - head_.size()), total - written_);
      bufs[1] = net::const_buffer();
    }
    arm(Clock::now() + shared_->limits.write_timeout);
    sock_.async_write_some(bufs, [self = shared_from_this()](error_code ec, std::size_t n) {
      self->disarm();
      if (ec) {
        self->finish(0);
        return self->close_now();
      }
      self->written_ += n;
      self->write();
    });
  }

  // The answer is on the wire.
  void written() {
    finish(status_);
    head_.clear();
    std::string().swap(body_);
    if (!close_after_) {
      ex_.reset();
      head_only_ = false;
      version_ = 11;
      idle_since_ = Clock::now();
      started_ = ex_.buffer().size() > 0;  // a pipelined request already buffered
      request_start_ = idle_since_;
      return serve();
    }
    ex_.reset();  // the request's body and what it holds (its memory claims) go now, not after the linger
    if (!linger_after_) return close_now();
    // The client may still be sending the body the answer refused: read and drop it for a while, so that it sees the
    // answer rather than a reset (RFC 9112 §9.6).
    error_code ignored;
    sock_.shutdown(tcp::socket::shutdown_send, ignored);
    linger_until_ = Clock::now() + shared_->limits.linger;
    drain();
  }

  void drain() {
    if (Clock::now() >= linger_until_) return close_now();
    arm(linger_until_);
    sock_.async_read_some(net::buffer(scratch_), [self = shared_from_this()](error_code ec, std::size_t) {
      self->disarm();
      if (ec) return self->close_now();
      self->drain();
    });
  }

  // The request's accounting, once (status 0: not answered).
  void finish(int status) {
    if (!begun_) {
      if (status != 0) shared_->routes.on_end(path_, status, -1, false);
      return;
    }
    begun_ = false;
    shared_->routes.on_end(path_, status, seconds_since(arrived_), true);
    hold_.reset();
  }

  void close() {
    finish(0);
    close_now();
  }

  void close_now() {
    if (closed_) return;
    closed_ = true;
    hold_.reset();
    ex_.reset();
    error_code ignored;
    timer_.cancel();
    sock_.shutdown(tcp::socket::shutdown_both, ignored);
    sock_.close(ignored);
    if (shared_->closed && !shared_->stopping) shared_->closed();
  }

  tcp::socket sock_;
  net::steady_timer timer_;
  std::shared_ptr<Shared> shared_;
  Exchange ex_;
  unsigned timer_gen_ = 0;
  bool timed_out_ = false, closed_ = false;
  bool started_ = false;  // a byte of the current request arrived
  bool begun_ = false;    // its header arrived (on_begin was called)
  Clock::time_point idle_since_{}, request_start_{}, body_start_{}, linger_until_{}, arrived_{};
  std::string path_;
  unsigned version_ = 11;
  bool head_only_ = false;
  // The answer being written.
  int status_ = 0;
  std::string head_, body_;
  std::size_t written_ = 0;
  bool close_after_ = false, linger_after_ = false;
  std::shared_ptr<void> hold_;
  std::array<char, 16384> scratch_{};
};

}  // namespace

struct HttpTransport::Impl {
  Impl(TransportLimits limits, HttpRoutes& routes)
      : ioc(std::max(1, limits.io_threads)),
        shared(std::make_shared<Shared>(limits, routes)),
        acceptor(net::make_strand(ioc)),
        retry(acceptor.get_executor()) {}

  net::io_context ioc;  // declared first: destroyed last, after every I/O object
  std::shared_ptr<Shared> shared;
  tcp::acceptor acceptor;
  net::steady_timer retry;  // after an accept error (out of file descriptors): try again shortly
  std::vector<std::thread> threads;
  int open = 0;  // connections, on the acceptor's strand
  bool paused = false;
  std::once_flag stopped;

  void accept() {
    if (shared->stopping) return;
    if (open >= shared->limits.max_connections) {
      paused = true;  // the kernel's accept queue holds the next ones
      return;
    }
    acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
      if (shared->stopping) return;
      if (ec) {
        retry.expires_after(std::chrono::milliseconds(100));
        retry.async_wait([this](error_code e) {
          if (!e) accept();
        });
        return;
      }
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // answers go in two writes at most: no Nagle delay
      ++open;
      std::make_shared<Connection>(std::move(socket), shared)->start();
      accept();
    });
  }

  void connection_closed() {
    net::post(acceptor.get_executor(), [this] {
      --open;
      if (paused && open < shared->limits.max_connections) {
        paused = false;
        accept();
      }
    });
  }
};

HttpTransport::HttpTransport(TransportLimits limits, HttpRoutes& routes)
    : impl_(std::make_unique<Impl>(limits, routes)) {
  impl_->shared->closed = [impl = impl_.get()] { impl->connection_closed(); };
}

HttpTransport::~HttpTransport() {
  stop();
}

int HttpTransport::bind(const std::string& host, int port) {
  Impl& s = *impl_;
  error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (!ec) {
    const tcp::endpoint ep(address, static_cast<unsigned short>(port));
    s.acceptor.open(ep.protocol(), ec);
    if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) s.acceptor.bind(ep, ec);
    if (!ec) s.acceptor.listen(1024, ec);
  }
  if (ec)
    throw Error(ErrorKind::Io, "cannot listen on " + host + ":" + std::to_string(port) + " (" + ec.message() + ")");
  return s.acceptor.local_endpoint().port();
}

void HttpTransport::start() {
  Impl& s = *impl_;
  net::post(s.acceptor.get_executor(), [&s] { s.accept(); });
  // A handler that throws leaves run() with the exception (the routes catch their own; this is the last line):
  // the thread goes on serving the others, as Asio's documentation advises, and that connection is dropped.
  for (int i = 0; i < std::max(1, s.shared->limits.io_threads); ++i)
    s.threads.emplace_back([&s] {
      for (;;) {
        try {
          s.ioc.run();
          return;
        } catch (...) {
        }
      }
    });
}

void HttpTransport::stop() {
  Impl& s = *impl_;
  std::call_once(s.stopped, [&s] {
    s.shared->stopping = true;
    net::post(s.acceptor.get_executor(), [&s] {
      error_code ignored;
      s.acceptor.close(ignored);
      s.retry.cancel();
    });
    s.ioc.stop();
    for (std::thread& t : s.threads) t.join();
    s.threads.clear();
  });
}

std::string HttpTransport::serve_bytes(std::string_view wire, const TransportLimits& limits, HttpRoutes& routes,
                                       std::chrono::milliseconds wait) {
  Exchange ex(limits);
  std::string out;
  std::size_t fed = 0;
  bool begun = false, head_only = false;
  unsigned version = 11;
  std::string path;
  const auto respond = [&](HttpResponse&& r, bool close) {
    const bool c = close || r.close || !ex.keep_alive();
    out += response_head(r, version, c, r.body.size());
    if (!head_only) out += r.body;
    routes.on_end(path, r.status, begun ? 0.0 : -1.0, begun);
    begun = false;
    return c;
  };
  for (;;) {
    switch (ex.advance()) {
      case Exchange::Event::NeedMore: {
        auto [p, n] = ex.buffer().space();
        const std::size_t k = std::min(n, wire.size() - fed);
        if (k == 0) {  // the client is done (or the buffer is full, which the exchange refuses first)
          if (begun) routes.on_end(path, 0, 0.0, true);
          return out;
        }
        std::memcpy(p, wire.data() + fed, k);
        fed += k;
        ex.buffer().commit(k);
        continue;
      }
      case Exchange::Event::Header: {
        HttpRequest& r = ex.request();
        begun = true;
        path = r.path;
        head_only = r.method == "HEAD";
        version = r.version;
        routes.on_begin();
        if (std::optional<HttpResponse> early = routes.on_header(r)) {
          respond(std::move(*early), r.has_body());
          return out;
        }
        ex.accept_body();
        if (ex.expects_continue() && ex.in_body()) out += kContinue;
        continue;
      }
      case Exchange::Event::Request: {
        auto promise = std::make_shared<std::promise<HttpResponse>>();
        std::future<HttpResponse> answer = promise->get_future();
        routes.on_request(ex.take(), Responder([promise](HttpResponse&& r) { promise->set_value(std::move(r)); }));
        if (answer.wait_for(wait) != std::future_status::ready) {
          routes.on_end(path, 0, 0.0, true);
          return out;
        }
        HttpResponse r = answer.get();
        if (r.status == 0) {
          routes.on_end(path, 0, 0.0, true);
          return out;
        }
        if (respond(std::move(r), false)) return out;
        ex.reset();
        continue;
      }
      case Exchange::Event::Refuse: {
        const Exchange::Refusal& f = ex.refusal();
        if (!begun) path = ex.request().path;
        respond(routes.refusal(f.status, f.type, f.message), true);
        return out;
      }
    }
  }
}

struct HttpClient::Impl {
  net::io_context ioc;
  tcp::socket sock{ioc};
  boost::beast::flat_buffer buf;
  std::string host;
};

HttpClient::HttpClient(const std::string& host, int port, std::chrono::seconds timeout)
    : impl_(std::make_unique<Impl>()) {
  error_code ec;
  tcp::resolver resolver(impl_->ioc);
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (!ec) net::connect(impl_->sock, endpoints, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot connect to " + host + ":" + std::to_string(port) + ": " + ec.message());
  const timeval tv{static_cast<time_t>(timeout.count()), 0};
  ::setsockopt(impl_->sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(impl_->sock.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  impl_->sock.set_option(tcp::no_delay(true), ec);
  impl_->host = host + ":" + std::to_string(port);
}

HttpClient::~HttpClient() = default;

std::pair<int, std::string> HttpClient::post(const std::string& target, std::string_view body,
                                             const std::string& content_type) {
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, impl_->host);
  req.set(http::field::content_type, content_type);
  req.body() = std::string(body);
  req.prepare_payload();
  error_code ec;
  http::write(impl_->sock, req, ec);
  http::response_parser<http::string_body> res;
  res.body_limit(boost::none);
  if (!ec) http::read(impl_->sock, impl_->buf, res, ec);
  if (ec) throw Error(ErrorKind::Io, "POST " + target + " to " + impl_->host + ": " + ec.message());
  return {static_cast<int>(res.get().result_int()), std::move(res.get().body())};
}

}  // namespace superpoint_rt::server
