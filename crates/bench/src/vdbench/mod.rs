//! vdbench parameter files (in progress)
