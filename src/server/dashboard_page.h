// The admin dashboard (GET / on the admin listener): one self-contained HTML page — web/dashboard's
// page and script with uPlot (npm, pinned in web/dashboard/package-lock.json) inlined at build
// time (cmake/embed_dashboard.cmake) and compiled into the binary. It holds no data: it polls
// /admin/stats, so it is served without the admin token (the page asks for the token when
// /admin/stats answers 401), behind the same Host and Origin checks.
#pragma once

#include <string_view>

namespace hengshi::server {

std::string_view dashboard_page();

}  // namespace hengshi::server
