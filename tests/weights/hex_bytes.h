#pragma once
// Bytes as the known-answer vector files write them (lowercase hex), and
// fp32 values from their bytes: shared by the codec tests.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gpumem::weights::test {

inline std::string unhex(const std::string& hex) {
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

inline std::string hex(const void* data, size_t bytes) {
  std::string s;
  char buf[3];
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    s += buf;
  }
  return s;
}
inline std::string hex(const std::string& s) { return hex(s.data(), s.size()); }
template <class T>
std::string hex(const std::vector<T>& v) {
  return hex(v.data(), v.size() * sizeof(T));
}

inline std::vector<float> floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

}  // namespace gpumem::weights::test
