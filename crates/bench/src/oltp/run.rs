//! A run: start the background processes, release the sessions, measure, stop, report.
