#include "results/merge.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/errors.h"
#include "common/text.h"
#include "results/knees.h"

namespace decodebench {

using json = nlohmann::json;

namespace {

json config_without_shard(json c) {
  if (c.is_object()) c.erase("shard");
  return c;
}

// "i/n" of a report's config ("0/1" when it has none: an unsharded sweep); {-1, -1} when the
// value is not i/n.
std::pair<int, int> shard_of(const Report& r) {
  if (!r.config.is_object() || !r.config.contains("shard")) return {0, 1};
  const json& v = r.config.at("shard");
  int i = -1, n = -1;
  char tail = 0;
  if (!v.is_string() || std::sscanf(v.get<std::string>().c_str(), "%d/%d%c", &i, &n, &tail) != 2 ||
      n < 1 || i < 0 || i >= n) {
    return {-1, -1};
  }
  return {i, n};
}

}  // namespace

Report merge_reports(std::span<const Report> shards, const MergeOptions& options) {
  if (shards.empty()) throw InputError("merge: no reports given");
  auto name = [&](std::size_t s) {
    return s < options.names.size() ? options.names[s] : fmt::format("report {}", s);
  };
  Report out = shards[0];
  out.results.clear();
  out.created = iso8601_utc_now();
  out.completion = {};
  const json config = config_without_shard(shards[0].config);
  std::set<std::pair<std::string, std::string>> devices;
  for (const auto& d : shards[0].devices) devices.insert({d.backend, d.name});

  // The shard set: one count, every index once, every shard whole.
  std::vector<std::string> problems;  // what makes the set incomplete
  const int n = shard_of(shards[0]).second;
  std::map<int, std::size_t> given;  // shard index -> input
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto [i, count] = shard_of(shards[s]);
    if (count < 0) {
      throw InputError(fmt::format("merge: {}: config.shard {} is not i/n", name(s),
                                   shards[s].config.at("shard").dump()));
    }
    if (count != n) {
      throw InputError(fmt::format(
          "merge: {} is shard {}/{} but {} is shard {}/{}: shards of one sweep have one count",
          name(s), i, count, name(0), shard_of(shards[0]).first, n));
    }
    if (const auto it = given.find(i); it != given.end()) {
      throw InputError(fmt::format("merge: shard {}/{} is given twice ({} and {})", i, n,
                                   name(it->second), name(s)));
    }
    given[i] = s;
    const std::string note = partial_note(shards[s]);
    if (!note.empty())
      problems.push_back(fmt::format("shard {}/{} ({}) is {}", i, n, name(s), note));
  }
  std::vector<int> missing_shards;
  for (int i = 0; i < n; ++i) {
    if (!given.count(i)) missing_shards.push_back(i);
  }
  if (!missing_shards.empty()) {
    std::vector<std::string> names;
    for (int i : missing_shards) names.push_back(fmt::format("{}/{}", i, n));
    problems.insert(problems.begin(),
                    fmt::format("missing shard{} {} of {}", missing_shards.size() > 1 ? "s" : "",
                                join(names), n));
  }
  if (!problems.empty() && !options.allow_partial) {
    std::string msg = "merge: the shard set is not whole: ";
    for (std::size_t k = 0; k < problems.size(); ++k) msg += (k ? "; " : "") + problems[k];
    throw InputError(msg +
                     " (run or resume those shards: `decodebench sweep --shard i/n` or `sweep "
                     "--resume REPORT`; --allow-partial merges what is there)");
  }

  std::set<int> seen;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const Report& r = shards[s];
    if (config_without_shard(r.config) != config) {
      throw InputError(fmt::format(
          "merge: {} was made with a different sweep config than {} (only 'shard' may differ)",
          name(s), name(0)));
    }
    std::set<std::pair<std::string, std::string>> mine;
    for (const auto& d : r.devices) mine.insert({d.backend, d.name});
    if (mine != devices) {
      throw InputError(
          fmt::format("merge: {} ran on {} but {} on {}; merge only shards of one device type",
                      name(s), r.devices.empty() ? "no device" : r.devices[0].name, name(0),
                      shards[0].devices.empty() ? "no device" : shards[0].devices[0].name));
    }
    for (const auto& p : r.results) {
      if (!seen.insert(p.index).second) {
        throw InputError(
            fmt::format("merge: point {} appears twice ({}); were the same shards given twice?",
                        p.index, name(s)));
      }
      out.results.push_back(p);
    }
    out.completion.points_planned += r.completion.points_planned;
  }
  if (!missing_shards.empty() && options.planned_points) {
    // The missing shards' points, so the merged report names every point it lacks.
    const std::set<int> missing(missing_shards.begin(), missing_shards.end());
    for (PointResult& p : options.planned_points()) {
      if (missing.count(p.index % n) && seen.insert(p.index).second) {
        p.status = PointStatus::not_run;
        out.results.push_back(std::move(p));
        ++out.completion.points_planned;
      }
    }
  }
  if (!problems.empty()) {
    out.completion.state = Completion::State::partial;
    for (std::size_t k = 0; k < problems.size(); ++k)
      out.completion.reason += (k ? "; " : "") + problems[k];
  }
  std::sort(out.results.begin(), out.results.end(),
            [](const PointResult& a, const PointResult& b) { return a.index < b.index; });
  if (out.config.is_object() && out.config.contains("shard")) out.config["shard"] = "0/1";
  out.knees = compute_knees(out.results);
  return out;
}

}  // namespace decodebench
