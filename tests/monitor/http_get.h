#pragma once
// GET http://127.0.0.1:<port><path> through libcurl, for tests that talk to
// the exporter or to Prometheus.
#include <string>

#include <curl/curl.h>

namespace gpumem::test {

struct HttpResult {
  long status = 0;  // 0: no answer
  std::string body;
};

inline HttpResult http_get(const std::string& url, long timeout_ms = 5000) {
  HttpResult result;
  CURL* curl = curl_easy_init();
  if (!curl) return result;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROXY, "");  // loopback never goes through a proxy
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &result.body);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t count, void* out) {
        static_cast<std::string*>(out)->append(data, size * count);
        return size * count;
      });
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
  curl_easy_cleanup(curl);
  return result;
}

inline std::string url_encode(const std::string& text) {
  std::string out;
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace gpumem::test
