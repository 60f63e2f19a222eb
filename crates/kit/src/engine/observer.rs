//! Who watches a bench as it runs: the engine tells an [`Observer`], on the
//! calling thread, when a run starts, each interval as the collector closes
//! it, when a run finishes, and anything worth a line between (the CLI's live
//! display, or [`Quiet`]).

use crate::model::RunDef;
use crate::result::{IntervalRecord, RunRecord};

/// Who watches a bench as it runs (the live display, or nobody).
pub trait Observer {
    fn run_started(&mut self, _run: &RunDef, _target_iops: Option<f64>) {}
    fn interval(&mut self, _run: &RunDef, _record: &IntervalRecord) {}
    fn run_finished(&mut self, _record: &RunRecord) {}
    /// Something worth a line (a curve stopped, a pause).
    fn note(&mut self, _message: &str) {}
}

/// An observer that says nothing.
pub struct Quiet;
impl Observer for Quiet {}
