//! The SLOB loop, run by each session thread.
