#include "report/html/summary_section.h"

#include "gpumem/common/units.h"

namespace gpumem::report::html {

void summary_section(Document& doc, const Summary& s) {
  if (s.verdict.decided()) {
    doc.heading("Verdict");
    doc.paragraph(verdict_line(s.verdict));
  }
  for (const auto& note : s.notes) doc.paragraph(note);
  if (!s.breakdown.empty()) {
    Table t;
    t.caption = s.breakdown_title;
    t.header = {"what", "bytes", "meaning"};
    for (const auto& r : s.breakdown) t.rows.push_back({r.name, format_bytes(r.bytes), r.meaning});
    doc.table(t);
  }
  if (!s.changes.empty()) {
    doc.heading(s.changes_title);
    Table t;
    t.header = {"change", "needs before", "needs after", "cost"};
    for (const auto& c : s.changes) t.rows.push_back({c.change, format_bytes(c.before), format_bytes(c.after), c.cost});
    doc.table(t);
  }
}

}  // namespace gpumem::report::html
