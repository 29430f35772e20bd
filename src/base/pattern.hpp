// Users' regular expressions over variable names (gradient scaling, L2
// regularisation), made safe to run on untrusted input.
//
// libstdc++'s default matcher backtracks (a pattern such as "(a*)*b" takes
// time exponential in the name's length) and its compiler recurses once per
// nested group and copies a bounded repeat's sub-automaton once per count.
// So a pattern is at most 256 characters with at most 16 nested groups and
// repeat counts up to 100 (four counted repeats at most), and it runs on the
// breadth-first matcher (regex_constants::__polynomial: time polynomial in
// the name's length; back-references, which it cannot run, are refused).
#pragma once

#include <algorithm>
#include <cctype>
#include <regex>
#include <string>

#include "base/error.hpp"

namespace tpt::model {

inline std::regex name_pattern(const std::string &pattern, const std::string &who) {
  constexpr size_t kMaxLength = 256;
  constexpr int kMaxDepth = 16, kMaxCount = 100, kMaxCounted = 4;
  if (pattern.size() > kMaxLength)
    invalid_argument(who + ": the pattern has " + std::to_string(pattern.size()) + " characters; at most " +
                     std::to_string(kMaxLength));
  int depth = 0, max_depth = 0, counted = 0;
  bool escaped = false, in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (escaped) {
      escaped = false;
      continue;
    }
    if (c == '\\') {
      escaped = true;
    } else if (in_class) {
      if (c == ']') in_class = false;
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ')') {
      --depth;
    } else if (c == '{') {
      ++counted;
      for (size_t j = i + 1; j < pattern.size() && pattern[j] != '}'; ++j) {
        if (!std::isdigit(static_cast<unsigned char>(pattern[j]))) continue;
        size_t k = j;
        while (k < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[k]))) ++k;
        if (k - j > 3 || std::stoi(pattern.substr(j, k - j)) > kMaxCount)
          invalid_argument(who + ": the pattern's repeat count " + pattern.substr(j, k - j) + " is over " +
                           std::to_string(kMaxCount));
        j = k - 1;
      }
    }
  }
  if (max_depth > kMaxDepth)
    invalid_argument(who + ": the pattern nests " + std::to_string(max_depth) + " groups; at most " +
                     std::to_string(kMaxDepth));
  if (counted > kMaxCounted)
    invalid_argument(who + ": the pattern has " + std::to_string(counted) + " counted repeats ({m,n}); at most " +
                     std::to_string(kMaxCounted));
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
  } catch (const std::regex_error &e) {
    invalid_argument(who + ": pattern '" + pattern + "' is not a regular expression: " + e.what());
  }
}

}  // namespace tpt::model
