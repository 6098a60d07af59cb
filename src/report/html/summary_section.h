#pragma once
// The part every page shares with its text report (report/summary.h): the
// verdict, the breakdown at the peak and the changes, as the text says them.
#include "gpumem/report/html/document.h"
#include "gpumem/report/summary.h"

namespace gpumem::report::html {

void summary_section(Document& doc, const Summary& summary);

}  // namespace gpumem::report::html
