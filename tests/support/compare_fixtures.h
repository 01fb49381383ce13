// Reports with fabricated samples for the compare tests (tests/report and tests/cli): seeded
// lognormal noise, and a shared host whose bandwidth swings move time and paired bandwidth
// together.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "report/significance.h"
#include "results/report.h"

namespace decodebench::test {

// median * exp(sigma * N(0, 1)): the median of the distribution is exactly `median`.
inline std::vector<double> lognormal_samples(std::mt19937_64& rng, double median, double sigma,
                                             int n) {
  std::normal_distribution<double> z(0.0, 1.0);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(median * std::exp(sigma * z(rng)));
  return out;
}

// Samples of a point on a shared host: each sample's moment has a speed s ~ exp(swing * N(0,1));
// the step takes time_s / s and the paired read runs at bandwidth_Bps * s, each with its own
// small `jitter`. time x bandwidth cancels s.
struct HostSamples {
  std::vector<double> seconds, read_Bps;
};
inline HostSamples shared_host_samples(std::mt19937_64& rng, double time_s, double bandwidth_Bps,
                                       double swing, double jitter, int n) {
  std::normal_distribution<double> z(0.0, 1.0);
  HostSamples h;
  for (int i = 0; i < n; ++i) {
    const double s = std::exp(swing * z(rng));
    h.seconds.push_back(time_s / s * std::exp(jitter * z(rng)));
    h.read_Bps.push_back(bandwidth_Bps * s * std::exp(jitter * z(rng)));
  }
  return h;
}

// An ok cpu-backend point (kernel "cpu", asked for as "auto") with these samples.
inline PointResult timed_point(int index, int batch, std::vector<double> samples,
                               std::vector<double> paired = {}, std::string kernel = "cpu") {
  PointResult p;
  p.index = index;
  p.kernel = std::move(kernel);
  p.kernel_requested = "auto";
  p.backend = "cpu";
  p.model = "llama-3.1-8b";
  p.num_q_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.num_layers = 32;
  p.block_size = 16;
  p.batch = batch;
  p.context = ContextSpec::fixed(1024);
  p.hit_rate = 0.5;
  p.status = PointStatus::ok;
  p.time_s.median = median_of(samples);
  p.time_s.samples = static_cast<int>(samples.size());
  p.samples = std::move(samples);
  p.paired_read_samples = std::move(paired);
  p.timing = TimingRecord{TimingMethod::host_clock_per_step, 1, /*warm_l2=*/false};
  return p;
}

inline Report cpu_report(std::vector<PointResult> points, std::string cpu = "Test CPU 9000",
                         int threads = 2) {
  Report r = new_report();
  r.created = "2026-01-01T00:00:00Z";
  r.host.cpu = cpu;
  r.host.cpu_threads = threads;
  DeviceRecord d;
  d.backend = "cpu";
  d.name = cpu;
  d.sm_count = threads;
  r.devices = {d};
  r.results = std::move(points);
  r.completion.points_planned = static_cast<int>(r.results.size());
  return r;
}

}  // namespace decodebench::test
