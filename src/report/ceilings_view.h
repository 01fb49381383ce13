// `decodebench ceilings`'s document and its views: the device record (results/report.h) with
// its measured ceilings, the links' datasheet rows and any measured links, read back strictly so
// that `decodebench report` re-prints a saved ceilings file exactly as ceilings printed it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/datasheet.h"
#include "results/report.h"

namespace decodebench {

struct CeilingsDocument {
  DeviceRecord device;
  std::vector<LinkDatasheet> datasheet_links;   // configs/devices.json "links" when measured
  std::vector<LinkMeasurement> measured_links;  // a GPU's timed copies; none on the CPU
};

// The document `ceilings --out` writes: the device record, then "links" (datasheet rows first).
nlohmann::json ceilings_json(const CeilingsDocument& d);
// Its reader; InputError naming `source` and the key for anything missing, mistyped or unknown.
CeilingsDocument ceilings_from_json(const nlohmann::json& j, const std::string& source);
// Whether `j` is such a document (a device record with "links"), not a report or another kind.
bool is_ceilings_document(const nlohmann::json& j);

// The views: the lines `ceilings` prints, and one row per ceiling (csv, md).
std::string ceilings_text(const CeilingsDocument& d);
std::string ceilings_rows(const CeilingsDocument& d, bool markdown);

}  // namespace decodebench
