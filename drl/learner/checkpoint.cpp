#include "learner/checkpoint.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace shesha::learner {
namespace {

constexpr char kMagic[8] = {'S', 'H', 'E', 'S', 'H', 'A', 'C', 'K'};
constexpr std::uint32_t kFormat = 1;
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 31;  // sanity bound on lengths read

std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (std::size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

// The host is little-endian x86-64 (as the wire's element encoding assumes): raw copies.
class Writer {
public:
    template <typename T>
    void put(T v) {
        const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
        out.insert(out.end(), p, p + sizeof v);
    }
    void floats(const std::vector<float>& v) {
        put<std::uint64_t>(v.size());
        const auto* p = reinterpret_cast<const std::uint8_t*>(v.data());
        out.insert(out.end(), p, p + v.size() * sizeof(float));
    }
    std::vector<std::uint8_t> out;
};

class Reader {
public:
    explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}
    template <typename T>
    bool get(T& v) {
        if (in_.size() - pos_ < sizeof v) return false;
        std::memcpy(&v, in_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return true;
    }
    bool floats(std::vector<float>& v) {
        std::uint64_t n = 0;
        if (!get(n) || n > kMaxElements || (in_.size() - pos_) / sizeof(float) < n) return false;
        v.resize(n);
        std::memcpy(v.data(), in_.data() + pos_, n * sizeof(float));
        pos_ += n * sizeof(float);
        return true;
    }
    bool bytes(std::string& s, std::size_t n) {
        if (in_.size() - pos_ < n) return false;
        s.assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
        pos_ += n;
        return true;
    }
    std::size_t pos() const { return pos_; }

private:
    std::span<const std::uint8_t> in_;
    std::size_t pos_ = 0;
};

}  // namespace

bool save_checkpoint(const std::string& path, const LearnerState& s, const std::string& env_name, std::string& error) {
    Writer w;
    w.out.insert(w.out.end(), kMagic, kMagic + sizeof kMagic);
    w.put<std::uint32_t>(kFormat);
    w.put<std::uint16_t>(s.cluster_id);
    w.put<std::uint16_t>(0);
    w.put<std::uint32_t>(s.version);
    w.put<std::uint64_t>(s.env_steps);
    w.put<std::uint64_t>(s.chunks_applied);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(env_name.size()));
    w.out.insert(w.out.end(), env_name.begin(), env_name.end());
    w.floats(s.parameters);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(s.optimizers.size()));
    for (const rl::OptimizerState& o : s.optimizers) {
        w.put<std::uint64_t>(o.steps);
        w.put<std::uint32_t>(static_cast<std::uint32_t>(o.buffers.size()));
        for (const auto& b : o.buffers) w.floats(b);
    }
    w.put<std::uint64_t>(fnv1a(w.out.data(), w.out.size()));

    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) {
            error = "cannot write " + tmp;
            return false;
        }
        f.write(reinterpret_cast<const char*>(w.out.data()), static_cast<std::streamsize>(w.out.size()));
        f.flush();
        if (!f) {
            error = "write failed on " + tmp;
            return false;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
        return false;
    }
    return true;
}

bool load_checkpoint(const std::string& path, LearnerState& s, std::string& env_name, std::string& error) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        error = "cannot read " + path;
        return false;
    }
    const std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto bad = [&](const char* what) {
        error = path + ": " + what;
        return false;
    };
    if (data.size() < sizeof kMagic + 8 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
        return bad("not a shesha-learner checkpoint (bad magic)");
    std::uint64_t stored_sum = 0;
    std::memcpy(&stored_sum, data.data() + data.size() - 8, 8);
    if (stored_sum != fnv1a(data.data(), data.size() - 8)) return bad("checksum mismatch (truncated or corrupted)");

    Reader r(std::span<const std::uint8_t>(data.data() + sizeof kMagic, data.size() - sizeof kMagic - 8));
    std::uint32_t format = 0, name_len = 0, slices = 0;
    std::uint16_t pad = 0;
    if (!r.get(format) || format != kFormat) return bad("unsupported checkpoint format version");
    if (!r.get(s.cluster_id) || !r.get(pad) || !r.get(s.version) || !r.get(s.env_steps) || !r.get(s.chunks_applied) ||
        !r.get(name_len) || name_len > 256 || !r.bytes(env_name, name_len) || !r.floats(s.parameters) || !r.get(slices) ||
        slices > 65535)
        return bad("truncated header or parameters");
    s.optimizers.assign(slices, {});
    for (rl::OptimizerState& o : s.optimizers) {
        std::uint32_t buffers = 0;
        if (!r.get(o.steps) || !r.get(buffers) || buffers > 8) return bad("truncated optimizer state");
        o.buffers.assign(buffers, {});
        for (auto& b : o.buffers)
            if (!r.floats(b)) return bad("truncated optimizer buffer");
    }
    if (r.pos() != data.size() - sizeof kMagic - 8) return bad("trailing bytes after the optimizer state");
    return true;
}

}  // namespace shesha::learner
