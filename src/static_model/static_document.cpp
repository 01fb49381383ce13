// The static model's JSON document read back (static_report.h: StaticDocument), strictly: the one
// reader beside static_json, the one writer.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/json_in.h"
#include "static_model/static_report.h"

namespace decodebench::static_model {

namespace {

std::uint32_t read_hex(const JsonIn& in) {
  const std::string text = in.string();
  std::uint32_t v = 0;
  const char* end = text.data() + text.size();
  const bool prefixed = text.size() > 2 && text[0] == '0' && text[1] == 'x';
  const auto [ptr, ec] = std::from_chars(text.data() + (prefixed ? 2 : 0), end, v, /*base=*/16);
  if (!prefixed || ec != std::errc() || ptr != end)
    in.fail("'" + text + "' is not an address (0x followed by hex digits)");
  return v;
}

// A count the writer wrote as a non-negative integer.
long count(const JsonIn& in) {
  const std::int64_t v = in.integer();
  if (v < 0) in.fail(fmt::format("{} is negative", v));
  return static_cast<long>(v);
}

Instance read_instance(const JsonIn& e) {
  e.reject_unknown_keys({"rung", "kernel", "demangled", "arch", "kv_dtype", "head_dim", "group_cap",
                         "registers", "static_smem", "ctas_per_sm", "occupancy_limited_by",
                         "total_instructions", "total_barriers", "loops", "threads", "dynamic_smem",
                         "occupancy_error", "main_loop"});
  Instance i;
  // The name's parts come from the demangled name, as the analysis took them; the written ones
  // must agree.
  i.name = parse_kernel_name(e.at("demangled").string());
  if (!i.name.decode) e.at("demangled").fail("not a decode kernel's name");
  if (e.at("rung").string() != i.name.rung) e.at("rung").fail("differs from the demangled name's");
  if (e.at("kernel").string() != i.name.kernel)
    e.at("kernel").fail("differs from the demangled name's");
  if (e.at("head_dim").int32() != i.name.head_dim)
    e.at("head_dim").fail("differs from the demangled name's");
  if (e.at("group_cap").int32() != i.name.group_cap)
    e.at("group_cap").fail("differs from the demangled name's");
  const nlohmann::json want_dtype = i.name.kv_dtype
                                        ? nlohmann::json(std::string(dtype_name(*i.name.kv_dtype)))
                                        : nlohmann::json();
  if (e.at("kv_dtype").json() != want_dtype)
    e.at("kv_dtype").fail("differs from the demangled name's");
  i.arch = e.at("arch").string();
  const int registers = static_cast<int>(count(e.at("registers")));
  if (registers > 0) {
    ResourceUsage r;
    r.arch = i.arch;
    r.registers = registers;
    r.shared = static_cast<int>(count(e.at("static_smem"))) + kReservedSmemPerBlock;
    i.resources = r;
  } else if (count(e.at("static_smem")) != 0) {
    e.at("static_smem").fail("is given without the registers (0: no resource usage read)");
  }
  if (e.at("threads").json().is_null() != e.at("dynamic_smem").json().is_null())
    e.at("threads").fail("must be null together with dynamic_smem (no launcher), or both given");
  if (!e.at("threads").json().is_null()) {
    i.launch = LaunchShape{static_cast<int>(count(e.at("threads"))),
                           static_cast<std::size_t>(count(e.at("dynamic_smem")))};
  }
  i.occupancy.ctas_per_sm = static_cast<int>(count(e.at("ctas_per_sm")));
  i.occupancy.limited_by = e.at("occupancy_limited_by").string();
  if (e.has("occupancy_error")) i.occupancy.error = e.at("occupancy_error").string();
  i.totals.instructions = count(e.at("total_instructions"));
  i.totals.barriers = count(e.at("total_barriers"));
  i.totals.loops = static_cast<int>(count(e.at("loops")));
  const JsonIn l = e.at("main_loop");
  if (l.json().is_null()) return i;
  l.reject_unknown_keys({"head",
                         "tail",
                         "kv_loops",
                         "instructions",
                         "nested_unknown",
                         "nested_known",
                         "inner_instructions",
                         "kv_loads",
                         "kv_bytes_per_warp",
                         "scale_bytes_per_warp",
                         "scale_loads",
                         "narrow_loads",
                         "instructions_per_byte",
                         "barriers",
                         "async_copies",
                         "commit_groups",
                         "wait_depth",
                         "in_flight_per_warp",
                         "in_flight_per_cta",
                         "in_flight_per_sm",
                         "issue_bound_bandwidth"});
  MainLoop& m = i.loop;
  m.found = true;
  m.head = read_hex(l.at("head"));
  m.tail = read_hex(l.at("tail"));
  m.kv_loops = static_cast<int>(count(l.at("kv_loops")));
  m.instructions = count(l.at("instructions"));
  m.nested_unknown = l.at("nested_unknown").boolean();
  m.nested_known = count(l.at("nested_known"));
  m.inner_instructions = count(l.at("inner_instructions"));
  m.kv_loads = static_cast<int>(count(l.at("kv_loads")));
  m.kv_bytes_per_warp = count(l.at("kv_bytes_per_warp"));
  m.scale_bytes_per_warp = count(l.at("scale_bytes_per_warp"));
  m.scale_loads = static_cast<int>(count(l.at("scale_loads")));
  m.narrow_loads = static_cast<int>(count(l.at("narrow_loads")));
  m.barriers = count(l.at("barriers"));
  m.async_copies = l.at("async_copies").boolean();
  m.commit_groups = count(l.at("commit_groups"));
  m.wait_depth = l.at("wait_depth").int32();
  if (m.wait_depth < -1) l.at("wait_depth").fail("is below -1 (-1: no wait)");
  m.in_flight_per_warp = count(l.at("in_flight_per_warp"));
  // The derived figures are recomputed when printed; a file that disagrees was edited.
  const auto same = [](double a, double b) {
    return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)});
  };
  if (!same(l.at("instructions_per_byte").number(), m.instructions_per_byte()))
    l.at("instructions_per_byte").fail("disagrees with instructions over the bytes per warp");
  if (count(l.at("in_flight_per_cta")) != i.in_flight_per_cta())
    l.at("in_flight_per_cta").fail("disagrees with in_flight_per_warp x the warps");
  if (count(l.at("in_flight_per_sm")) != i.in_flight_per_sm())
    l.at("in_flight_per_sm").fail("disagrees with in_flight_per_cta x ctas_per_sm");
  return i;
}

}  // namespace

bool is_static_document(const nlohmann::json& j) {
  return j.is_object() && j.contains("assumptions") && j.contains("instances") &&
         j.contains("devices");
}

StaticDocument static_from_json(const nlohmann::json& j, const std::string& source) {
  const JsonIn in(j, source);
  in.reject_unknown_keys({"assumptions", "devices", "instances", "binary", "cuobjdump"});
  StaticDocument d;
  const JsonIn a = in.at("assumptions");
  a.reject_unknown_keys({"warp_instructions_per_clock_per_sm", "dram_latency_s"});
  if (a.at("warp_instructions_per_clock_per_sm").number() != kWarpInstructionsPerClockPerSm)
    a.at("warp_instructions_per_clock_per_sm")
        .fail(fmt::format("is not this build's {:g}: the figures were modeled with another rule",
                          kWarpInstructionsPerClockPerSm));
  d.settings.latency_seconds = a.at("dram_latency_s").number();
  if (!(d.settings.latency_seconds > 0)) a.at("dram_latency_s").fail("must be > 0");
  const JsonIn devices = in.at("devices");
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const JsonIn e = devices.at(k);
    e.reject_unknown_keys(
        {"key", "name", "sm_count", "boost_clock_hz", "bandwidth", "littles_law_bytes_per_sm"});
    DeviceFigures f{e.at("key").string(), e.at("name").string(), e.at("sm_count").int32(),
                    e.at("boost_clock_hz").number(), e.at("bandwidth").number()};
    if (f.sm_count <= 0 || !(f.boost_clock_hz > 0) || !(f.bandwidth > 0))
      e.fail("sm_count, boost_clock_hz and bandwidth must be > 0");
    d.settings.devices.push_back(std::move(f));
  }
  if (d.settings.devices.empty()) devices.fail("lists no device");
  const JsonIn instances = in.at("instances");
  for (std::size_t k = 0; k < instances.size(); ++k)
    d.instances.push_back(read_instance(instances.at(k)));
  if (in.has("binary")) d.binary = in.at("binary").string();
  if (in.has("cuobjdump")) d.cuobjdump = in.at("cuobjdump").string();
  return d;
}

}  // namespace decodebench::static_model
