"""From stored trials to findings: tables, intervals and tests, additivity, plots and curves,
exports, comparisons of studies, the HTML report, speed columns and progress views. Reads
``study.store``; never trains or starts Ray."""
