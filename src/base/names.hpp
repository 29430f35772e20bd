// Names the user typed against the names that exist: the edit distance, and
// the existing names closest first (for errors that suggest the right one).
#pragma once

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace tpt {

// Levenshtein's distance: insertions, deletions and substitutions.
inline size_t edit_distance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// `names`, the closest to `want` first (edit distance, then the name).
inline std::vector<std::string> closest_first(const std::string &want, std::vector<std::string> names) {
  std::vector<std::tuple<size_t, std::string>> scored;
  for (auto &n : names) scored.emplace_back(edit_distance(want, n), std::move(n));
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (auto &s : scored) out.push_back(std::move(std::get<1>(s)));
  return out;
}

}  // namespace tpt
