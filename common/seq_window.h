// SeqWindow: which of one sender's recent sequence numbers have been seen, for one chunk index.
// The switch's admission stage and the learner keep one per (worker, chunk) to tell a duplicated
// GRADIENT from a reordered one (docs/transport.md, "Duplicates"). A worker's chunks of the same index carry strictly
// increasing seqs (a seq is the update's; a chunk waiting for credit keeps its first seq while
// later updates are summed into it, and the slot is freed when it is sent), so the pair
// (worker_id, seq) names one datagram per chunk index, and a switch-merged chunk carries its first
// contributor's pair. The window is IPsec's anti-replay window: the highest seq seen and a bitmap
// of the kWidth seqs at and below it; comparisons are serial (RFC 1982), so the 32-bit wrap is
// harmless.
#pragma once

#include <cstdint>

namespace shesha {

enum class SeqVerdict : std::uint8_t {
    New,        // not seen: apply it
    Duplicate,  // seen already: a copy of a datagram already applied
    TooOld,     // kWidth or more behind the highest seen: cannot tell, so never applied
};

class SeqWindow {
public:
    static constexpr std::uint32_t kWidth = 64;

    // What seq would be; changes nothing.
    SeqVerdict classify(std::uint32_t seq) const noexcept {
        if (bits_ == 0) return SeqVerdict::New;
        const auto ahead = static_cast<std::int32_t>(seq - highest_);
        if (ahead > 0) return SeqVerdict::New;
        const auto behind = static_cast<std::uint32_t>(-static_cast<std::int64_t>(ahead));
        if (behind >= kWidth) return SeqVerdict::TooOld;
        return (bits_ >> behind) & 1U ? SeqVerdict::Duplicate : SeqVerdict::New;
    }

    // Records seq as seen (call after classify said New and the chunk was taken).
    void mark(std::uint32_t seq) noexcept {
        if (bits_ == 0) {
            highest_ = seq;
            bits_ = 1;
            return;
        }
        const auto ahead = static_cast<std::int32_t>(seq - highest_);
        if (ahead > 0) {
            bits_ = static_cast<std::uint32_t>(ahead) >= kWidth ? 1 : (bits_ << ahead) | 1U;
            highest_ = seq;
            return;
        }
        const auto behind = static_cast<std::uint32_t>(-static_cast<std::int64_t>(ahead));
        if (behind < kWidth) bits_ |= std::uint64_t{1} << behind;
    }

    void clear() noexcept { bits_ = 0; }
    bool empty() const noexcept { return bits_ == 0; }
    std::uint32_t highest() const noexcept { return highest_; }

private:
    std::uint32_t highest_ = 0;
    std::uint64_t bits_ = 0;  // bit i: highest_ - i was seen; 0: nothing seen yet
};

}  // namespace shesha
