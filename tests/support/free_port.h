// free_loopback_port: a port the kernel just handed out on 127.0.0.1 — free, unless someone takes
// it in the instant before the caller's server binds it (callers retry on a failed start).
#pragma once

namespace hengshi::testing {

int free_loopback_port();

}  // namespace hengshi::testing
