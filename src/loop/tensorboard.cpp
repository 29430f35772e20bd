// tensorpack's TFEventWriter: scalars and images in a TensorFlow event file
// that TensorBoard reads. The few protobuf fields (Event, Summary, Image,
// SessionLog) are encoded by hand, the TFRecord framing carries CRC32C
// checksums computed here, and images are PNG (base/png.cpp): no protobuf or
// TensorFlow library is needed.
// docs/callbacks.md gives the format.
#include <ATen/core/Tensor.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/files.hpp"
#include "base/png.hpp"
#include "loop/callback.hpp"
#include "loop/trainer.hpp"

namespace tpt {

namespace {

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), a table at a time.
const std::array<uint32_t, 256> &crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

uint32_t crc32c(const uint8_t *p, size_t n) {
  const auto &t = crc32c_table();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// TFRecord's masked CRC: rotate right by 15 and add a constant.
uint32_t masked_crc(const uint8_t *p, size_t n) {
  uint32_t c = crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// Protobuf wire format, the parts an Event needs.
class Proto {
 public:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      b_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    b_.push_back(static_cast<uint8_t>(v));
  }
  void tag(int field, int wire) { varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
  void int_field(int field, int64_t v) {
    tag(field, 0);
    varint(static_cast<uint64_t>(v));
  }
  void double_field(int field, double v) {
    tag(field, 1);
    uint64_t u;
    std::memcpy(&u, &v, 8);
    for (int i = 0; i < 8; ++i) b_.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  void float_field(int field, float v) {
    tag(field, 5);
    uint32_t u;
    std::memcpy(&u, &v, 4);
    for (int i = 0; i < 4; ++i) b_.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  void bytes_field(int field, const void *p, size_t n) {
    tag(field, 2);
    varint(n);
    const auto *c = static_cast<const uint8_t *>(p);
    b_.insert(b_.end(), c, c + n);
  }
  void string_field(int field, const std::string &s) { bytes_field(field, s.data(), s.size()); }
  void message_field(int field, const Proto &m) { bytes_field(field, m.b_.data(), m.b_.size()); }
  const std::vector<uint8_t> &bytes() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class TensorBoardWriter final : public Callback {
 public:
  explicit TensorBoardWriter(std::string dir) : Callback("TFEventWriter", false), dir_(std::move(dir)) {}
  ~TensorBoardWriter() override { close(); }
  uint32_t events() const override {
    return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER_EPOCH | TPT_EVENT_AFTER_TRAIN | TPT_EVENT_RECORD;
  }
  void on_event(Trainer &t, tpt_event e, const Record *r) override {
    switch (e) {
      case TPT_EVENT_BEFORE_TRAIN: open(t); break;
      case TPT_EVENT_RECORD:
        if (file_.is_open()) record(t, *r);
        break;
      case TPT_EVENT_TRIGGER_EPOCH: flush(t); break;  // tensorpack flushes on every trigger
      case TPT_EVENT_AFTER_TRAIN:
        flush(t);
        close();
        break;
      default: break;
    }
  }

 private:
  void open(Trainer &t) {
    close();
    std::string dir = dir_.empty() ? (t.has_logdir() ? t.logdir() : "") : dir_;
    if (dir.empty()) return;  // tensorpack: no logger dir, a NoOpMonitor
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    long long now = static_cast<long long>(wall_time());
    std::string base = dir + "/events.out.tfevents." + std::to_string(now) + "." + host;
    path_ = base;
    for (int k = 1; std::filesystem::exists(path_, ec); ++k) path_ = base + "." + std::to_string(k);
    try {
      file_.create(path_, /*exclusive=*/true);
    } catch (const Error &e) {
      if (e.code() != TPT_ERR_IO) throw;
      // Like its write errors: logged, and training goes on without events.
      t.log().error("TFEventWriter: " + std::string(e.what()) + "; no events are written in this run");
      return;
    }
    buf_.clear();
    buffered_ = dropped_ = 0;
    Proto ev;
    ev.double_field(1, wall_time());
    ev.string_field(3, "brain.Event:2");
    write(t, ev);
    if (t.resume_checkpoint()) {
      // SessionLog START: TensorBoard drops what the interrupted run wrote
      // at this step and after (it keeps steps below the event's).
      Proto log, start;
      log.int_field(1, 1);  // status START
      start.double_field(1, wall_time());
      start.int_field(2, t.global_step() + 1);
      start.message_field(6, log);
      write(t, start);
    }
    flush(t);
    t.log().info("TFEventWriter: writing " + path_);
  }

  void record(Trainer &t, const Record &r) {
    Proto summary;
    if (r.kind == TPT_RECORD_SCALAR) {
      Proto value;
      value.string_field(1, *r.name);
      value.float_field(2, static_cast<float>(r.value));
      summary.message_field(1, value);
    } else if (r.kind == TPT_RECORD_IMAGE && r.image) {
      const at::Tensor &img = *r.image;  // uint8 N x H x W x C, contiguous (tpt_trainer_put_image)
      const int64_t n = img.size(0), h = img.size(1), w = img.size(2), c = img.size(3);
      const auto *p = static_cast<const uint8_t *>(img.data_ptr());
      for (int64_t k = 0; k < n; ++k) {
        std::vector<uint8_t> png = encode_png(p + k * h * w * c, h, w, c);
        Proto image, value;
        image.int_field(1, h);
        image.int_field(2, w);
        image.int_field(3, c);
        image.bytes_field(4, png.data(), png.size());
        value.string_field(1, n == 1 ? *r.name : *r.name + "/" + std::to_string(k));
        value.message_field(4, image);
        summary.message_field(1, value);
      }
    } else {
      return;
    }
    Proto ev;
    ev.double_field(1, wall_time());
    ev.int_field(2, r.global_step);
    ev.message_field(5, summary);
    write(t, ev);
  }

  // One TFRecord: length, its masked CRC, the data, the data's masked CRC;
  // into the buffer that flush() appends to the file.
  void write(Trainer &t, const Proto &ev) {
    if (!file_.is_open()) return;
    const std::vector<uint8_t> &d = ev.bytes();
    uint8_t head[12];
    uint64_t len = d.size();
    for (int i = 0; i < 8; ++i) head[i] = static_cast<uint8_t>(len >> (8 * i));
    uint32_t lc = masked_crc(head, 8);
    for (int i = 0; i < 4; ++i) head[8 + i] = static_cast<uint8_t>(lc >> (8 * i));
    uint32_t dc = masked_crc(d.data(), d.size());
    uint8_t tail[4];
    for (int i = 0; i < 4; ++i) tail[i] = static_cast<uint8_t>(dc >> (8 * i));
    buf_.insert(buf_.end(), head, head + 12);
    buf_.insert(buf_.end(), d.begin(), d.end());
    buf_.insert(buf_.end(), tail, tail + 4);
    ++buffered_;
    // TensorFlow's FileWriter flushes every 120 s; a live TensorBoard sees
    // a run's events within kFlushSeconds here.
    if (buf_.size() >= kFlushBytes || std::chrono::steady_clock::now() - last_flush_ > kFlushSeconds) flush(t);
  }

  // The buffered records, appended whole or not at all (a full disk): the
  // file always ends with a whole record. Failures are logged once, like
  // tensorpack's ModelSaver's IO errors, and training goes on; the events of
  // a failed write are lost and counted.
  void flush(Trainer &t) {
    last_flush_ = std::chrono::steady_clock::now();
    if (!file_.is_open() || buf_.empty()) return;
    bool ok = file_.append(buf_.data(), buf_.size());
    if (ok) {
      if (dropped_ > 0)
        report_.succeeded(t.log(), "TFEventWriter: writing " + path_ + " (" + std::to_string(dropped_) +
                                       " event(s) were lost meanwhile)");
      dropped_ = 0;
    } else {
      dropped_ += buffered_;
      report_.failed(t.log(), "TFEventWriter: cannot write " + path_ + ": " + std::strerror(file_.error()) +
                                  "; its events are lost until it can be written");
    }
    buf_.clear();
    buffered_ = 0;
  }

  void close() { file_.close(); }

  static constexpr size_t kFlushBytes = 1 << 20;
  static constexpr std::chrono::seconds kFlushSeconds{10};
  std::string dir_, path_;
  AppendFile file_;
  std::vector<uint8_t> buf_;  // whole records not yet written
  int64_t buffered_ = 0;      // how many
  int64_t dropped_ = 0;       // records lost since the last write that worked
  std::chrono::steady_clock::time_point last_flush_;
  FailureReport report_;
};

}  // namespace

std::unique_ptr<Callback> make_tensorboard_writer(std::string dir) {
  return std::make_unique<TensorBoardWriter>(std::move(dir));
}

}  // namespace tpt
