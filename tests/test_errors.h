#pragma once
// Checking gpumem's errors in tests: the one line an InputError carries.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"

namespace gpumem::test {

// The message of the InputError f throws, checked to be one line; a failure
// (and "") when f throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

}  // namespace gpumem::test
