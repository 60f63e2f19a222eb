//! Environment, CPU and device statistics (in progress)
