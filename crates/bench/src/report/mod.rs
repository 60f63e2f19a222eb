//! Reports (in progress)
