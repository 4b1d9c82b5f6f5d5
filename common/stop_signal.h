// SIGINT / SIGTERM as a flag that the programs' loops poll. No SA_RESTART, so blocking calls
// (recvmsg, poll) return EINTR promptly and the loop sees the flag.
#pragma once

namespace shesha::stop_signal {

void install() noexcept;
bool requested() noexcept;

}  // namespace shesha::stop_signal
