#include "static_model/static_report.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "common/dtype.h"
#include "report/table.h"

namespace decodebench::static_model {
namespace {

std::string dtype_label(const KernelName& k) {
  return k.kv_dtype ? std::string(dtype_name(*k.kv_dtype)) : "-";
}
std::string cap_label(const KernelName& k) {
  if (!k.kv_dtype) return "-";
  const std::string cap = k.group_cap > 0 ? std::to_string(k.group_cap) : "any";
  return k.half_blocks ? cap + ", P = 8" : cap;
}
std::string hex(std::uint32_t a) { return fmt::format("{:#x}", a); }
std::string kib(double bytes) { return fmt::format("{:.0f}", bytes / 1024); }
std::string tbps(double bps) { return bps > 0 ? fmt::format("{:.1f}", bps / 1e12) : "n/a"; }

std::string ctas_label(const Instance& i) {
  if (!i.launch) return "n/a";
  if (i.occupancy.ctas_per_sm == 0) return "0";
  return std::to_string(i.occupancy.ctas_per_sm);
}

// "0x21f0-0x6210, cp.async, wait 1; nested, inner trip count unknown (+120 per inner iteration)"
std::string loop_label(const MainLoop& m) {
  std::string s = hex(m.head) + "-" + hex(m.tail);
  s += m.async_copies ? fmt::format(", cp.async: {} commit group(s) per iteration, DEPBAR.LE {}",
                                    m.commit_groups, m.wait_depth)
                      : ", LDG";
  if (m.nested_unknown) {
    s += fmt::format("; nested, inner trip count unknown (+{} per inner iteration)",
                     m.inner_instructions);
  }
  if (m.nested_known > 0) s += fmt::format("; nested loops of known trip count counted");
  if (m.kv_loops > 1) s += fmt::format("; {} KV loops, the largest", m.kv_loops);
  return s;
}

std::string assumptions(const ModelSettings& s, bool markdown) {
  std::string text;
  const std::string b = markdown ? "" : "  ";
  text += b + fmt::format(
                  "issue bound = {:g} warp-instructions per clock per SM x SMs x boost clock / "
                  "(warp-instructions per KV byte of the main loop):",
                  kWarpInstructionsPerClockPerSm);
  for (const DeviceFigures& d : s.devices) {
    text += fmt::format(" {} {} SMs x {:.2f} GHz;", d.key, d.sm_count, d.boost_clock_hz / 1e9);
  }
  text.back() = '.';
  text += markdown ? "\n" : "\n";
  text += b + fmt::format("Little's law at an assumed loaded DRAM latency of {:.0f} ns:",
                          s.latency_seconds * 1e9);
  for (const DeviceFigures& d : s.devices) {
    text += fmt::format(" {} {:.2f} TB/s -> {:.1f} KiB in flight per SM;", d.key,
                        d.bandwidth / 1e12, littles_law_bytes_per_sm(d, s.latency_seconds) / 1024);
  }
  text.back() = '.';
  text += "\n";
  text += b +
          "Static smem excludes the 1 KiB per block the system reserves (the occupancy "
          "calculator adds it); KV B/iter is per warp; in flight: docs/design.md \"Static "
          "model\".\n";
  return text;
}

}  // namespace

int Instance::static_smem() const {
  if (!resources) return 0;
  return std::max(0, resources->shared - kReservedSmemPerBlock);
}

std::vector<Instance> analyze_instances(const std::vector<Function>& functions,
                                        const std::vector<ResourceUsage>& resources,
                                        const Hooks& hooks,
                                        const std::vector<std::string>& rung_order) {
  std::map<std::pair<std::string, std::string>, ResourceUsage> by_name;
  for (const ResourceUsage& r : resources) by_name.insert({{r.name, r.arch}, r});
  std::vector<Instance> out;
  for (const Function& f : functions) {
    if (f.arch.rfind("sm_90", 0) != 0) continue;
    KernelName name = parse_kernel_name(demangle(f.name));
    if (!name.decode) continue;
    Instance i;
    i.name = std::move(name);
    i.arch = f.arch;
    if (auto r = by_name.find({f.name, f.arch}); r != by_name.end()) i.resources = r->second;
    if (hooks.launch_shape) i.launch = hooks.launch_shape(i.name);
    if (i.launch && i.resources && hooks.occupancy) {
      i.occupancy = hooks.occupancy(i.resources->registers,
                                    static_cast<std::size_t>(i.static_smem()), *i.launch);
    }
    i.loop = analyze_main_loop(f);
    if (i.name.kv_dtype) add_format_bytes(i.loop, *i.name.kv_dtype, i.name.head_dim);
    i.totals = function_totals(f);
    out.push_back(std::move(i));
  }
  auto rung_index = [&](const std::string& rung) {
    const auto it = std::find(rung_order.begin(), rung_order.end(), rung);
    return static_cast<std::size_t>(it - rung_order.begin());
  };
  std::sort(out.begin(), out.end(), [&](const Instance& a, const Instance& b) {
    auto key = [&](const Instance& i) {
      return std::make_tuple(rung_index(i.name.rung), i.name.rung, !i.loop.found,
                             i.name.kv_dtype ? static_cast<int>(*i.name.kv_dtype) : -1,
                             i.name.head_dim, i.name.group_cap, i.name.kernel, i.arch);
    };
    return key(a) < key(b);
  });
  return out;
}

std::string static_table(const std::vector<Instance>& instances, const ModelSettings& s) {
  std::string t = "Static model of the decode kernels (main loop read from the SASS):\n";
  for (const Instance& i : instances) {
    t += fmt::format("  {} {} <{}, {}, {}> ({})\n", i.name.rung, i.name.kernel, dtype_label(i.name),
                     i.name.head_dim, cap_label(i.name), i.arch);
    const int regs = i.resources ? i.resources->registers : 0;
    t += fmt::format(
        "      resources:  {} registers, {} B static smem, {} B dynamic, {} threads; "
        "{} CTAs/SM{}\n",
        regs, i.static_smem(), i.launch ? i.launch->dynamic_smem : 0,
        i.launch ? i.launch->threads : 0, ctas_label(i),
        i.occupancy.limited_by.empty() ? "" : " (" + i.occupancy.limited_by + ")");
    if (!i.loop.found) {
      t += fmt::format("      no KV loop: {} instructions, {} loop(s), {} barrier(s) in all\n",
                       i.totals.instructions, i.totals.loops, i.totals.barriers);
      continue;
    }
    const MainLoop& m = i.loop;
    t += fmt::format("      main loop:  {}\n", loop_label(m));
    t += fmt::format(
        "      per iter:   {} warp-instructions, {} KV B per warp ({} loads){}, {:.3f} instr/B, "
        "{} barrier(s)\n",
        m.instructions, m.bytes_per_warp(), m.kv_loads,
        m.scale_bytes_per_warp > 0 || m.scale_loads > 0
            ? fmt::format(" of which {} B scales and zeros at P = {} ({} staged loads)",
                          m.scale_bytes_per_warp, kFormatBlockSize, m.scale_loads)
            : std::string(),
        m.instructions_per_byte(), m.barriers);
    t += fmt::format("      in flight:  {} KiB per CTA, {} KiB per SM\n",
                     kib(i.in_flight_per_cta()), i.launch ? kib(i.in_flight_per_sm()) : "n/a");
    std::string bounds;
    for (const DeviceFigures& d : s.devices) {
      bounds += fmt::format("{}{} {} TB/s", bounds.empty() ? "" : ", ", d.key,
                            tbps(issue_bound_bandwidth(m.instructions_per_byte(), d)));
    }
    t += "      issue bound: " + bounds + "\n";
  }
  if (instances.empty()) t += "  (no decode kernel compiled for sm_90 in this binary)\n";
  t += '\n';
  t += assumptions(s, /*markdown=*/false);
  return t;
}

std::string static_markdown(const std::vector<Instance>& instances, const ModelSettings& s) {
  Table t;
  for (const char* title : {"rung", "kernel", "kv dtype"}) t.columns.push_back({title});
  t.columns.push_back({"head_dim", true});
  t.columns.push_back({"group cap"});
  for (const char* title :
       {"registers", "static smem (B)", "dynamic smem (B)", "threads", "CTAs/SM"}) {
    t.columns.push_back({title, true});
  }
  t.columns.push_back({"main loop"});
  for (const char* title : {"instr/iter", "KV B/iter", "instr/B", "barriers/iter",
                            "in flight/CTA (KiB)", "in flight/SM (KiB)"}) {
    t.columns.push_back({title, true});
  }
  for (const DeviceFigures& d : s.devices) {
    t.columns.push_back({fmt::format("issue bound {} (TB/s)", d.key), true});
  }
  for (const Instance& i : instances) {
    const int regs = i.resources ? i.resources->registers : 0;
    std::vector<std::string> row = {i.name.rung,
                                    "`" + i.name.kernel + "`",
                                    dtype_label(i.name),
                                    std::to_string(i.name.head_dim),
                                    cap_label(i.name),
                                    std::to_string(regs),
                                    std::to_string(i.static_smem()),
                                    i.launch ? std::to_string(i.launch->dynamic_smem) : "n/a",
                                    i.launch ? std::to_string(i.launch->threads) : "n/a",
                                    ctas_label(i)};
    const MainLoop& m = i.loop;
    if (!m.found) {
      row.push_back(fmt::format("no KV loop ({} instructions, {} loops)", i.totals.instructions,
                                i.totals.loops));
    } else {
      row.insert(row.end(),
                 {loop_label(m), std::to_string(m.instructions), std::to_string(m.bytes_per_warp()),
                  fmt::format("{:.3f}", m.instructions_per_byte()), std::to_string(m.barriers),
                  kib(i.in_flight_per_cta()), i.launch ? kib(i.in_flight_per_sm()) : "n/a"});
      for (const DeviceFigures& d : s.devices) {
        row.push_back(tbps(issue_bound_bandwidth(m.instructions_per_byte(), d)));
      }
    }
    row.resize(t.columns.size());  // a kernel without a KV loop leaves the loop's cells empty
    t.add_row(std::move(row));
  }
  return render_md(t) + '\n' + assumptions(s, /*markdown=*/true);
}

nlohmann::json static_json(const std::vector<Instance>& instances, const ModelSettings& s) {
  nlohmann::json j = {{"assumptions",
                       {{"warp_instructions_per_clock_per_sm", kWarpInstructionsPerClockPerSm},
                        {"dram_latency_s", s.latency_seconds}}},
                      {"devices", nlohmann::json::array()},
                      {"instances", nlohmann::json::array()}};
  for (const DeviceFigures& d : s.devices) {
    j["devices"].push_back(
        {{"key", d.key},
         {"name", d.name},
         {"sm_count", d.sm_count},
         {"boost_clock_hz", d.boost_clock_hz},
         {"bandwidth", d.bandwidth},
         {"littles_law_bytes_per_sm", littles_law_bytes_per_sm(d, s.latency_seconds)}});
  }
  for (const Instance& i : instances) {
    nlohmann::json e = {
        {"rung", i.name.rung},
        {"kernel", i.name.kernel},
        {"demangled", i.name.demangled},
        {"arch", i.arch},
        {"kv_dtype", i.name.kv_dtype ? nlohmann::json(dtype_label(i.name)) : nlohmann::json()},
        {"head_dim", i.name.head_dim},
        {"group_cap", i.name.group_cap},
        {"registers", i.resources ? i.resources->registers : 0},
        {"static_smem", i.static_smem()},
        {"ctas_per_sm", i.occupancy.ctas_per_sm},
        {"occupancy_limited_by", i.occupancy.limited_by},
        {"total_instructions", i.totals.instructions},
        {"total_barriers", i.totals.barriers},
        {"loops", i.totals.loops}};
    if (i.launch) {
      e["threads"] = i.launch->threads;
      e["dynamic_smem"] = i.launch->dynamic_smem;
    } else {
      e["threads"] = nullptr;
      e["dynamic_smem"] = nullptr;
    }
    if (!i.occupancy.error.empty()) e["occupancy_error"] = i.occupancy.error;
    const MainLoop& m = i.loop;
    if (m.found) {
      nlohmann::json bounds = nlohmann::json::object();
      for (const DeviceFigures& d : s.devices) {
        bounds[d.key] = issue_bound_bandwidth(m.instructions_per_byte(), d);
      }
      e["main_loop"] = {{"head", hex(m.head)},
                        {"tail", hex(m.tail)},
                        {"kv_loops", m.kv_loops},
                        {"instructions", m.instructions},
                        {"nested_unknown", m.nested_unknown},
                        {"nested_known", m.nested_known},
                        {"inner_instructions", m.inner_instructions},
                        {"kv_loads", m.kv_loads},
                        {"kv_bytes_per_warp", m.kv_bytes_per_warp},
                        {"scale_bytes_per_warp", m.scale_bytes_per_warp},
                        {"scale_loads", m.scale_loads},
                        {"narrow_loads", m.narrow_loads},
                        {"instructions_per_byte", m.instructions_per_byte()},
                        {"barriers", m.barriers},
                        {"async_copies", m.async_copies},
                        {"commit_groups", m.commit_groups},
                        {"wait_depth", m.wait_depth},
                        {"in_flight_per_warp", m.in_flight_per_warp},
                        {"in_flight_per_cta", i.in_flight_per_cta()},
                        {"in_flight_per_sm", i.in_flight_per_sm()},
                        {"issue_bound_bandwidth", bounds}};
    } else {
      e["main_loop"] = nullptr;
    }
    j["instances"].push_back(std::move(e));
  }
  return j;
}

std::vector<std::string> summary_missing(const std::vector<Instance>& instances,
                                         const std::vector<std::string>& rungs) {
  std::vector<std::string> missing;
  for (const std::string& rung : rungs) {
    std::map<DType, std::set<int>> caps;
    for (const Instance& i : instances) {
      if (i.name.rung == rung && i.loop.found && i.name.kv_dtype &&
          i.name.head_dim == kSummaryHeadDim) {
        caps[*i.name.kv_dtype].insert(i.name.group_cap);
      }
    }
    const std::set<int>& f16 = caps[DType::f16];
    const std::set<int>& fp8 = caps[DType::fp8_e4m3];
    if (f16.empty()) missing.push_back(rung + " f16");
    if (fp8.empty()) missing.push_back(rung + " fp8_e4m3");
    for (int c : f16) {
      if (!fp8.count(c)) missing.push_back(fmt::format("{} fp8_e4m3 cap {}", rung, c));
    }
    for (int c : fp8) {
      if (!f16.count(c)) missing.push_back(fmt::format("{} f16 cap {}", rung, c));
    }
  }
  return missing;
}

std::string static_summary_markdown(const std::vector<Instance>& instances, const ModelSettings& s,
                                    const std::string& summary_device) {
  const auto dev = std::find_if(s.devices.begin(), s.devices.end(),
                                [&](const DeviceFigures& d) { return d.key == summary_device; });
  DeviceFigures d = dev != s.devices.end() ? *dev : DeviceFigures{};
  auto counted = [&](const Instance& i) {
    return i.loop.found && i.name.kv_dtype && i.name.head_dim == kSummaryHeadDim &&
           (*i.name.kv_dtype == DType::f16 || *i.name.kv_dtype == DType::fp8_e4m3);
  };
  // A rung with more than one KV-streaming kernel (cascade: its prefix and suffix passes) gets a
  // row per kernel, labelled "rung kernel" without the "_kernel".
  std::map<std::string, std::set<std::string>> kernels_of;
  for (const Instance& i : instances) {
    if (counted(i)) kernels_of[i.name.rung].insert(i.name.kernel);
  }
  auto row_label = [&](const Instance& i) {
    if (kernels_of[i.name.rung].size() < 2) return i.name.rung;
    std::string kernel = i.name.kernel;
    if (kernel.size() > 7 && kernel.compare(kernel.size() - 7, 7, "_kernel") == 0)
      kernel.resize(kernel.size() - 7);
    return i.name.rung + " " + kernel;
  };
  // (row, cap) in instance order -> (f16, fp8_e4m3) instances.
  std::vector<std::pair<std::string, int>> rows;
  std::map<std::tuple<std::string, int, DType>, const Instance*> cell;
  for (const Instance& i : instances) {
    if (!counted(i)) continue;
    const std::pair<std::string, int> row{row_label(i), i.name.group_cap};
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    cell[{row.first, i.name.group_cap, *i.name.kv_dtype}] = &i;
  }
  // Compact on purpose (README.md stays short): cells "f16/fp8", no padding, ".22" for 0.22.
  auto pair = [&](const std::string& rung, int cap, auto&& f) {
    std::string out;
    for (DType t : {DType::f16, DType::fp8_e4m3}) {
      const auto it = cell.find({rung, cap, t});
      if (!out.empty()) out += '/';
      out += it == cell.end() ? std::string("n/a") : f(*it->second);
    }
    return out;
  };
  auto fraction = [](double v) {
    const std::string text = fmt::format("{:.2f}", v);
    return text.rfind("0.", 0) == 0 ? text.substr(1) : text;
  };
  Table t;
  for (const char* title : {"rung", "cap", "instr/B", "issue bound TB/s", "CTAs/SM"}) {
    t.columns.push_back({title});
  }
  t.columns.push_back({fmt::format("KiB in flight/SM (need {:.0f})",
                                   littles_law_bytes_per_sm(d, s.latency_seconds) / 1024)});
  for (const auto& [rung, cap] : rows) {
    t.add_row({rung, cap > 0 ? std::to_string(cap) : "any",
               pair(rung, cap,
                    [&](const Instance& i) { return fraction(i.loop.instructions_per_byte()); }),
               pair(rung, cap,
                    [&](const Instance& i) {
                      return tbps(issue_bound_bandwidth(i.loop.instructions_per_byte(), d));
                    }),
               pair(rung, cap, [](const Instance& i) { return ctas_label(i); }),
               pair(rung, cap, [](const Instance& i) { return kib(i.in_flight_per_sm()); })});
  }
  return render_md(t, MdStyle::compact) +
         fmt::format(
             "\nFrom the SASS, no GPU run (`decodebench kernels --static`; docs/design.md \"Static "
             "model\"): f16/fp8_e4m3 KV, head_dim {}, {}.\n",
             kSummaryHeadDim, d.key);
}

}  // namespace decodebench::static_model
