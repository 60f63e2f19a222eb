//! Lines of items into general parameters and `sd`, `wd` and `rd` records.
//!
//! Structure (vdbench's): general parameters first, then every `sd`, then every
//! `wd`, then every `rd`. A line whose first item is `sd=`, `wd=` or `rd=`
//! starts a record; other lines continue the record before them (or, before
//! the first record, hold general parameters). One ambiguity needs a rule:
//! after a line ending in a comma, a line starting `sd=` inside a `wd` (or
//! `wd=` inside an `rd`) continues that record, since a wd's `sd=` is one of its
//! parameters; anywhere else a trailing comma is just allowed.
//!
//! `xx=default` records set values that each later record of that kind starts
//! from. Every value is checked as it is read (so a bad default is reported
//! even if no record uses it); what needs the whole record (a required `lun=`,
//! `warmup=` shorter than `elapsed=`) is checked when the record ends.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::error::{clean, Error, Pos, Result};
use super::expand::{self, IorateSpec, RdSpec};
use super::keys::{
    unsupported_hint, Kind, GENERAL_KEYS, GENERAL_UNSUPPORTED, RD_ALIASES, RD_KEYS, SD_KEYS,
    WD_KEYS,
};
use super::lexer::{Item, Line, Scalar, Value};
use super::value::{self, fmt_num};
use crate::model::{
    Arrival, Band, General, OpenFlags, Rate, RunDef, SdDef, Seek, WdDef, XferSize, INTERVALS_MAX,
    INTERVAL_MIN, RATE_IOPS_MAX,
};

/// Most outstanding I/Os one sd may be given (`threads=`, `forthreads=`).
pub(crate) const THREADS_MAX: u64 = 4096;
/// Most runs one plan may expand into.
pub(crate) const RUNS_MAX: usize = 10_000;

/// A value and where it was set (in the record or in a default it inherited).
#[derive(Debug, Clone)]
struct At<T> {
    v: T,
    pos: Pos,
}

#[derive(Debug, Clone, Default)]
struct SdFields {
    lun: Option<PathBuf>,
    size: Option<u64>,
    threads: Option<u32>,
    openflags: Option<OpenFlags>,
    offset: Option<u64>,
    align: Option<u64>,
    range: Option<Band>,
}

#[derive(Debug, Clone, Default)]
struct WdFields {
    sds: Option<Vec<String>>,
    rdpct: Option<f64>,
    xfersize: Option<XferSize>,
    seek: Option<Seek>,
    skew: Option<f64>,
    iorate: Option<f64>,
    priority: Option<u32>,
    range: Option<Band>,
    hotband: Option<Band>,
}

#[derive(Debug, Clone, Default)]
struct RdFields {
    wds: Option<At<Vec<String>>>,
    iorate: Option<At<IorateSpec>>,
    curve: Option<At<Vec<f64>>>,
    stopcurve: Option<At<f64>>,
    elapsed: Option<At<Duration>>,
    interval: Option<At<Duration>>,
    warmup: Option<At<Duration>>,
    distribution: Option<Arrival>,
    pause: Option<Duration>,
    threads: Option<Vec<u32>>,
    xfersizes: Option<Vec<u64>>,
    rdpcts: Option<Vec<f64>>,
    seeks: Option<Vec<Seek>>,
}

#[derive(Debug, Clone)]
enum Fields {
    Sd(SdFields),
    Wd(WdFields),
    // Boxed: an rd's fields are twice a wd's, and records move around.
    Rd(Box<RdFields>),
}

/// The record being read.
#[derive(Debug)]
struct Record {
    kind: Kind,
    name: String,
    name_pos: Pos,
    is_default: bool,
    /// Keys this record set itself (a key twice in one record is an error;
    /// overriding a default is not).
    set: BTreeMap<&'static str, Pos>,
    fields: Fields,
}

#[derive(Default)]
struct Parser {
    general: General,
    general_set: BTreeMap<&'static str, Pos>,
    /// The kind of the last record started; `None` while in general parameters.
    section: Option<Kind>,
    current: Option<Record>,
    sd_default: SdFields,
    wd_default: WdFields,
    rd_default: RdFields,
    /// Where each name was defined, per kind (duplicate check).
    defined: BTreeMap<(Kind, String), Pos>,
    sds: Vec<SdDef>,
    wds: Vec<WdDef>,
    runs: Vec<RunDef>,
    rd_count: usize,
    next_curve_id: usize,
}

/// The parsed file: general parameters, sds, wds, and the runs every rd expands into.
pub(crate) type Parsed = (General, Vec<SdDef>, Vec<WdDef>, Vec<RunDef>);

pub(crate) fn parse(lines: &[Line], end: Pos) -> Result<Parsed> {
    let mut p = Parser::default();
    let mut prev_trailing_comma = false;
    for line in lines {
        p.line(line, prev_trailing_comma)?;
        prev_trailing_comma = line.trailing_comma;
    }
    p.finish_record()?;
    if p.rd_count == 0 {
        return Err(Error::at(
            end,
            "no rd= record: nothing to run; expected an rd=NAME,wd=…,iorate=… line after the wd= records",
        ));
    }
    Ok((p.general, p.sds, p.wds, p.runs))
}

impl Parser {
    fn line(&mut self, line: &Line, prev_trailing_comma: bool) -> Result<()> {
        let Some(first) = line.items.first() else {
            return Ok(());
        };
        let starts = Kind::from_key(&first.key);
        let current = self.current.as_ref().map(|r| r.kind);
        let continues = prev_trailing_comma
            && matches!(
                (current, starts),
                (Some(Kind::Wd), Some(Kind::Sd)) | (Some(Kind::Rd), Some(Kind::Wd))
            );
        if let (Some(kind), false) = (starts, continues) {
            self.finish_record()?;
            if let Some(section) = self.section {
                if kind < section {
                    return Err(Error::at(
                        first.key_pos,
                        format!(
                            "{k}= after {s}=: vdbench reads sd, wd and rd definitions in that order; expected this {k}= before the first {s}=",
                            k = kind.name(),
                            s = section.name()
                        ),
                    ));
                }
            }
            self.section = Some(kind);
            self.start_record(kind, first)?;
            return line.items[1..]
                .iter()
                .try_for_each(|item| self.record_item(item));
        }
        if self.current.is_none() {
            return line
                .items
                .iter()
                .try_for_each(|item| self.general_item(item));
        }
        if !prev_trailing_comma && GENERAL_KEYS.contains(&first.key.as_str()) {
            let section = self.section.map_or("sd", Kind::name);
            return Err(Error::at(
                first.key_pos,
                format!(
                    "general parameter `{}=` after the {section}= records; expected general parameters before the first sd=",
                    first.key
                ),
            ));
        }
        line.items
            .iter()
            .try_for_each(|item| self.record_item(item))
    }

    fn start_record(&mut self, kind: Kind, item: &Item) -> Result<()> {
        let s = value::scalar(&item.value, kind.name(), "one name")?;
        let name = s.text.as_str();
        let is_default = name.eq_ignore_ascii_case("default");
        if !is_default {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            {
                return Err(Error::at(
                    s.pos,
                    format!(
                        "`{}` is not a valid {k} name; expected letters, digits, `_`, `-` and `.` (or {k}=default)",
                        clean(name),
                        k = kind.name()
                    ),
                ));
            }
            if let Some(first) = self.defined.get(&(kind, name.to_string())) {
                return Err(Error::at(
                    s.pos,
                    format!(
                        "{k} `{}` is defined twice (first at line {}); expected each {k} name once",
                        clean(name),
                        first.line,
                        k = kind.name()
                    ),
                ));
            }
            self.defined.insert((kind, name.to_string()), s.pos);
        }
        let fields = match kind {
            Kind::Sd => Fields::Sd(self.sd_default.clone()),
            Kind::Wd => Fields::Wd(self.wd_default.clone()),
            Kind::Rd => Fields::Rd(Box::new(self.rd_default.clone())),
        };
        self.current = Some(Record {
            kind,
            name: if is_default {
                "default".to_string()
            } else {
                name.to_string()
            },
            name_pos: s.pos,
            is_default,
            set: BTreeMap::new(),
            fields,
        });
        Ok(())
    }

    fn record_item(&mut self, item: &Item) -> Result<()> {
        let mut record = self
            .current
            .take()
            .expect("invariant: record_item is called only inside a record");
        let result = self.record_item_in(&mut record, item);
        self.current = Some(record);
        result
    }

    fn record_item_in(&self, record: &mut Record, item: &Item) -> Result<()> {
        let kind = record.kind;
        let key = item.key.as_str();
        let canonical = match kind {
            Kind::Rd => RD_ALIASES
                .iter()
                .find(|(alias, _)| *alias == key)
                .map_or(key, |(_, to)| *to),
            _ => key,
        };
        let Some(canonical) = kind.keys().iter().copied().find(|k| *k == canonical) else {
            return Err(unknown_in_record(record, item));
        };
        if let Some(first) = record.set.insert(canonical, item.key_pos) {
            return Err(Error::at(
                item.key_pos,
                format!(
                    "`{key}=` appears twice in {} `{}` (first at line {}); expected each parameter once",
                    kind.name(),
                    clean(&record.name),
                    first.line
                ),
            ));
        }
        match &mut record.fields {
            Fields::Sd(f) => sd_item(f, canonical, item),
            Fields::Wd(f) => self.wd_item(f, canonical, item),
            Fields::Rd(f) => self.rd_item(f, canonical, item),
        }
    }

    fn general_item(&mut self, item: &Item) -> Result<()> {
        let key = item.key.as_str();
        let Some(canonical) = GENERAL_KEYS.iter().copied().find(|k| *k == key) else {
            return Err(unknown_general(item));
        };
        if let Some(first) = self.general_set.insert(canonical, item.key_pos) {
            return Err(Error::at(
                item.key_pos,
                format!(
                    "general parameter `{key}=` appears twice (first at line {}); expected it once",
                    first.line
                ),
            ));
        }
        let g = &mut self.general;
        match canonical {
            "data_errors" => {
                let s = value::scalar(&item.value, key, "a number of errors")?;
                g.data_errors = value::whole_in(s, "data_errors", 1, u64::MAX)?;
            }
            "compratio" | "dedupratio" => {
                let s = value::scalar(&item.value, key, "a ratio such as 2")?;
                let ratio = value::number(s, &format!("{key} as a ratio such as 2 (for 2:1)"))?;
                if ratio < 1.0 {
                    return Err(Error::at(
                        s.pos,
                        format!("{key}={} is below 1; expected a ratio of at least 1 (1 = no reduction)", fmt_num(ratio)),
                    ));
                }
                if canonical == "compratio" {
                    g.compratio = ratio;
                } else {
                    g.dedupratio = ratio;
                }
            }
            "dedupunit" => {
                let s = value::scalar(&item.value, key, "a size such as 8k")?;
                let n = value::size(s, "dedupunit")?;
                if n == 0 || !n.is_multiple_of(512) {
                    return Err(Error::at(
                        s.pos,
                        format!("dedupunit={} is not usable; expected a multiple of 512 bytes such as 8k", value::format_size(n)),
                    ));
                }
                g.dedupunit_bytes = n;
            }
            "validate" => {
                let s = value::scalar(&item.value, key, "yes or no")?;
                g.validate = match s.text.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => {
                        return Err(Error::at(
                            s.pos,
                            format!(
                            "validate=`{}` is not supported; expected validate=yes or validate=no",
                            clean(&s.text)
                        ),
                        ))
                    }
                };
            }
            "histogram" => g.histogram_bounds_us = histogram(&item.value)?,
            // include= lines are spliced in by the lexer; reaching here means a bug.
            _ => {
                return Err(Error::at(
                    item.key_pos,
                    format!("`{key}=` is not handled here"),
                ))
            }
        }
        Ok(())
    }

    fn wd_item(&self, f: &mut WdFields, key: &str, item: &Item) -> Result<()> {
        let one = |expected: &str| value::scalar(&item.value, key, expected);
        match key {
            "sd" => {
                let names: Vec<String> = self.sds.iter().map(|s| s.name.clone()).collect();
                f.sds = Some(value::names(&item.value, &names, "sd")?);
            }
            "rdpct" => f.rdpct = Some(value::percent(one("a percentage")?, "rdpct")?),
            "xfersize" => f.xfersize = Some(xfersize(&item.value)?),
            "seekpct" => f.seek = Some(value::seek(one("0 to 100, sequential, eof or random")?)?),
            "skew" => {
                let s = one("a percentage")?;
                let skew = value::percent(s, "skew")?;
                if skew == 0.0 {
                    return Err(Error::at(
                        s.pos,
                        "skew=0 gives the workload no I/O; expected a share above 0 up to 100",
                    ));
                }
                f.skew = Some(skew);
            }
            "iorate" => {
                let s = one("a number of I/Os per second")?;
                let rate = value::number(s, "a number of I/Os per second for this workload")?;
                if rate == 0.0 {
                    return Err(Error::at(
                        s.pos,
                        "iorate=0 on a wd; expected a rate above 0, or no iorate=",
                    ));
                }
                check_rate_max(s, rate)?;
                f.iorate = Some(rate);
            }
            "priority" => {
                let s = one("a whole number from 1")?;
                let p = value::whole_in(s, "priority", 1, u64::from(u32::MAX))?;
                f.priority =
                    Some(u32::try_from(p).expect("invariant: checked against u32::MAX above"));
            }
            "range" => f.range = Some(value::band(&item.value, key)?),
            "hotband" => f.hotband = Some(value::band(&item.value, key)?),
            _ => {
                return Err(Error::at(
                    item.key_pos,
                    format!("`{key}=` is listed in WD_KEYS but not handled"),
                ))
            }
        }
        Ok(())
    }

    fn rd_item(&self, f: &mut RdFields, key: &str, item: &Item) -> Result<()> {
        let one = |expected: &str| value::scalar(&item.value, &item.key, expected);
        let pos = item.value.pos();
        match key {
            "wd" => {
                let names: Vec<String> = self.wds.iter().map(|w| w.name.clone()).collect();
                f.wds = Some(At {
                    v: value::names(&item.value, &names, "wd")?,
                    pos,
                });
            }
            "iorate" => {
                f.iorate = Some(At {
                    v: iorate(&item.value)?,
                    pos,
                })
            }
            "curve" => {
                f.curve = Some(At {
                    v: curve_points(&item.value)?,
                    pos,
                });
            }
            "stopcurve" => {
                let s = one("a response time in ms")?;
                let ms = value::number(s, "stopcurve as a response time in ms")?;
                if ms == 0.0 {
                    return Err(Error::at(s.pos, "stopcurve=0 would stop every curve at once; expected a response time in ms above 0"));
                }
                f.stopcurve = Some(At { v: ms, pos });
            }
            "elapsed" | "interval" => {
                let d = elapsed_or_interval(one("a time in seconds")?, key)?;
                let at = Some(At { v: d, pos });
                if key == "elapsed" {
                    f.elapsed = at;
                } else {
                    f.interval = at;
                }
            }
            "warmup" => {
                f.warmup = Some(At {
                    v: value::duration(one("a time in seconds")?, key)?,
                    pos,
                })
            }
            "pause" => f.pause = Some(value::duration(one("a time in seconds")?, key)?),
            "distribution" => {
                f.distribution = Some(arrival(one("exponential, uniform or deterministic")?)?);
            }
            "forthreads" => f.threads = Some(for_threads(&item.value)?),
            "forxfersize" => f.xfersizes = Some(for_xfersizes(&item.value)?),
            "forrdpct" => f.rdpcts = Some(for_rdpcts(&item.value)?),
            "forseekpct" => f.seeks = Some(value::expand_seeks(&item.value)?),
            _ => {
                return Err(Error::at(
                    item.key_pos,
                    format!("`{key}=` is listed in RD_KEYS but not handled"),
                ))
            }
        }
        Ok(())
    }

    fn finish_record(&mut self) -> Result<()> {
        let Some(record) = self.current.take() else {
            return Ok(());
        };
        if record.is_default {
            match record.fields {
                Fields::Sd(f) => self.sd_default = f,
                Fields::Wd(f) => self.wd_default = f,
                Fields::Rd(f) => self.rd_default = *f,
            }
            return Ok(());
        }
        let name = record.name;
        let shown = clean(&name);
        match record.fields {
            Fields::Sd(f) => {
                let Some(lun) = f.lun else {
                    return Err(Error::at(
                        record.name_pos,
                        format!("sd `{shown}` has no lun=; expected lun=/dev/… (a block device) or a file path"),
                    ));
                };
                self.sds.push(SdDef {
                    name,
                    lun,
                    size_bytes: f.size,
                    threads: f.threads.unwrap_or(8),
                    openflags: f.openflags.unwrap_or_default(),
                    offset_bytes: f.offset.unwrap_or(0),
                    align_bytes: f.align,
                    range: f.range,
                });
            }
            Fields::Wd(f) => {
                let Some(sds) = f.sds else {
                    return Err(Error::at(
                        record.name_pos,
                        format!("wd `{shown}` has no sd=; expected sd=NAME, sd=(a,b) or sd=sd*"),
                    ));
                };
                self.wds.push(WdDef {
                    name,
                    sds,
                    rdpct: f.rdpct.unwrap_or(100.0),
                    xfersize: f.xfersize.unwrap_or(XferSize::Fixed(4096)),
                    seek: f.seek.unwrap_or(Seek::Random(100.0)),
                    skew_pct: f.skew,
                    iorate: f.iorate,
                    priority: f.priority,
                    range: f.range,
                    hotband: f.hotband,
                });
            }
            Fields::Rd(f) => self.finish_rd(name, record.name_pos, *f)?,
        }
        Ok(())
    }

    fn finish_rd(&mut self, name: String, name_pos: Pos, f: RdFields) -> Result<()> {
        let shown = clean(&name);
        let Some(wds) = f.wds else {
            return Err(Error::at(
                name_pos,
                format!("rd `{shown}` has no wd=; expected wd=NAME, wd=(a,b) or wd=wd*"),
            ));
        };
        let Some(iorate) = f.iorate else {
            return Err(Error::at(
                name_pos,
                format!(
                    "rd `{shown}` has no iorate=; expected iorate=max (as fast as possible), a number of I/Os per second, a list (100,200,…) or curve"
                ),
            ));
        };
        let is_curve = matches!(iorate.v, IorateSpec::Curve);
        if !is_curve {
            if let Some(pos) = f
                .curve
                .as_ref()
                .map(|c| c.pos)
                .or(f.stopcurve.as_ref().map(|s| s.pos))
            {
                return Err(Error::at(
                    pos,
                    format!("curve=/stopcurve= in rd `{shown}` whose iorate= is not curve; expected iorate=curve, or no curve parameters"),
                ));
            }
        }
        let elapsed = f.elapsed.as_ref().map_or(Duration::from_secs(30), |a| a.v);
        let interval = f.interval.as_ref().map_or(Duration::from_secs(1), |a| a.v);
        let warmup = f.warmup.as_ref().map_or(Duration::ZERO, |a| a.v);
        let elapsed_pos = f.elapsed.as_ref().map_or(name_pos, |a| a.pos);
        if interval > elapsed {
            return Err(Error::at(
                f.interval.as_ref().map_or(elapsed_pos, |a| a.pos),
                format!(
                    "interval={}s is longer than elapsed={}s in rd `{shown}`; expected interval no longer than elapsed",
                    fmt_num(interval.as_secs_f64()),
                    fmt_num(elapsed.as_secs_f64())
                ),
            ));
        }
        let intervals = elapsed.as_nanos().div_ceil(interval.as_nanos().max(1));
        if intervals > u128::from(INTERVALS_MAX) {
            let fit_s = elapsed.as_secs_f64() / INTERVALS_MAX as f64;
            return Err(Error::at(
                f.interval.as_ref().map_or(elapsed_pos, |a| a.pos),
                format!(
                    "elapsed={}s at interval={}s in rd `{shown}` is {intervals} intervals, more than {INTERVALS_MAX} kept for one run; expected interval={} or longer",
                    fmt_num(elapsed.as_secs_f64()),
                    fmt_num(interval.as_secs_f64()),
                    fmt_num(fit_s.ceil())
                ),
            ));
        }
        if warmup >= elapsed {
            return Err(Error::at(
                f.warmup.as_ref().map_or(elapsed_pos, |a| a.pos),
                format!(
                    "warmup={}s is not shorter than elapsed={}s in rd `{shown}`; expected warmup < elapsed (the warm-up is part of the elapsed time)",
                    fmt_num(warmup.as_secs_f64()),
                    fmt_num(elapsed.as_secs_f64())
                ),
            ));
        }
        self.check_skews(&shown, &wds)?;
        let spec = RdSpec {
            name,
            wds: wds.v,
            iorate: iorate.v,
            curve_pcts: f
                .curve
                .map_or_else(|| vec![10.0, 50.0, 70.0, 80.0, 90.0, 100.0], |c| c.v),
            stop_ms: f.stopcurve.map(|s| s.v),
            elapsed,
            interval,
            warmup,
            arrival: f.distribution.unwrap_or_default(),
            pause: f.pause.unwrap_or(Duration::ZERO),
            threads: f.threads,
            xfersizes: f.xfersizes,
            rdpcts: f.rdpcts,
            seeks: f.seeks,
        };
        let fits = expand::count(&spec)
            .and_then(|n| n.checked_add(self.runs.len()))
            .is_some_and(|n| n <= RUNS_MAX);
        if !fits {
            return Err(Error::at(
                name_pos,
                format!("rd `{shown}` takes the plan past {RUNS_MAX} runs; expected fewer for… values or iorate= points"),
            ));
        }
        expand::expand(&spec, &mut self.next_curve_id, &mut self.runs);
        self.rd_count += 1;
        Ok(())
    }

    /// Skews share the run's rate: together at most 100%, and exactly 100% when
    /// every workload has one (otherwise part of the rate would go nowhere).
    fn check_skews(&self, rd: &str, wds: &At<Vec<String>>) -> Result<()> {
        let skews: Vec<f64> = wds
            .v
            .iter()
            .filter_map(|name| {
                self.wds
                    .iter()
                    .find(|w| w.name == *name)
                    .and_then(|w| w.skew_pct)
            })
            .collect();
        let sum: f64 = skews.iter().sum();
        if sum > 100.0 + 1e-6 {
            return Err(Error::at(
                wds.pos,
                format!(
                    "the skews of rd `{rd}`'s workloads add up to {}%; expected at most 100",
                    fmt_num(sum)
                ),
            ));
        }
        if !skews.is_empty() && skews.len() == wds.v.len() && sum < 100.0 - 1e-6 {
            return Err(Error::at(
                wds.pos,
                format!(
                    "the skews of rd `{rd}`'s workloads add up to {}%; expected 100 when every workload has a skew",
                    fmt_num(sum)
                ),
            ));
        }
        Ok(())
    }
}

fn sd_item(f: &mut SdFields, key: &str, item: &Item) -> Result<()> {
    let one = |expected: &str| value::scalar(&item.value, key, expected);
    match key {
        "lun" => {
            let s = one("one device or file path (define one sd per target)")?;
            if s.text.is_empty() {
                return Err(Error::at(
                    s.pos,
                    "lun= is empty; expected a block device or a file path",
                ));
            }
            f.lun = Some(PathBuf::from(&s.text));
        }
        "size" => {
            let s = one("a size such as 10g")?;
            let n = value::size(s, "size")?;
            if n == 0 {
                return Err(Error::at(
                    s.pos,
                    "size=0; expected the bytes to use, such as size=10g",
                ));
            }
            f.size = Some(n);
        }
        "threads" => {
            let n = value::whole_in(
                one("a number of outstanding I/Os")?,
                "threads",
                1,
                THREADS_MAX,
            )?;
            f.threads = Some(u32::try_from(n).expect("invariant: at most THREADS_MAX"));
        }
        "openflags" => {
            let mut flags = OpenFlags::default();
            for s in item.value.elements() {
                match s.text.to_ascii_lowercase().as_str() {
                    "o_direct" | "directio" => {}
                    "o_sync" | "o_dsync" | "sync" | "dsync" => flags.sync_writes = true,
                    _ => {
                        return Err(Error::at(
                            s.pos,
                            format!(
                                "openflags `{}` is not supported; expected o_direct, directio, o_sync, o_dsync, sync or dsync (Cairn always opens O_DIRECT)",
                                clean(&s.text)
                            ),
                        ))
                    }
                }
            }
            f.openflags = Some(flags);
        }
        "offset" => f.offset = Some(value::size(one("a size in bytes")?, "offset")?),
        "align" => {
            let s = one("a size such as 4k")?;
            let n = value::size(s, "align")?;
            if n == 0 || !n.is_multiple_of(512) {
                return Err(Error::at(
                    s.pos,
                    format!(
                        "align={} is not usable; expected a multiple of 512 bytes such as 4k",
                        value::format_size(n)
                    ),
                ));
            }
            f.align = Some(n);
        }
        "range" => f.range = Some(value::band(&item.value, key)?),
        _ => {
            return Err(Error::at(
                item.key_pos,
                format!("`{key}=` is listed in SD_KEYS but not handled"),
            ))
        }
    }
    Ok(())
}

/// `xfersize=`: a size, or `(size,pct,size,pct,…)` with the percentages adding up to 100.
fn xfersize(value: &Value) -> Result<XferSize> {
    let (open, items) = match value {
        Value::Scalar(s) => return Ok(XferSize::Fixed(value::xfer_bytes(s, "xfersize")?)),
        Value::List { items, .. } if items.len() == 1 => {
            return Ok(XferSize::Fixed(value::xfer_bytes(&items[0], "xfersize")?))
        }
        Value::List { open, items } => (*open, items),
    };
    if items.len() % 2 != 0 {
        return Err(Error::at(
            open,
            format!(
                "xfersize= lists {} values; expected (size,percent,size,percent,…) pairs",
                items.len()
            ),
        ));
    }
    let mut pairs = Vec::with_capacity(items.len() / 2);
    for pair in items.chunks_exact(2) {
        let bytes = value::xfer_bytes(&pair[0], "xfersize")?;
        let pct = value::percent(&pair[1], "xfersize share")?;
        if pct == 0.0 {
            return Err(Error::at(
                pair[1].pos,
                "xfersize share of 0%; expected a percentage above 0 (or leave the size out)",
            ));
        }
        pairs.push((bytes, pct));
    }
    let sum: f64 = pairs.iter().map(|(_, p)| p).sum();
    if (sum - 100.0).abs() > 1e-6 {
        return Err(Error::at(
            open,
            format!(
                "xfersize= percentages add up to {}; expected them to add up to 100",
                fmt_num(sum)
            ),
        ));
    }
    Ok(XferSize::Distribution(pairs))
}

/// A rate the schedule cannot time (see [`RATE_IOPS_MAX`]) is refused here,
/// with its place in the file, rather than failing the bench later.
fn check_rate_max(s: &Scalar, iops: f64) -> Result<()> {
    if iops > RATE_IOPS_MAX {
        return Err(Error::at(
            s.pos,
            format!(
                "iorate={} is above {} I/Os per second, the most the schedule can time (one arrival per nanosecond); expected a lower rate, or max",
                clean(&s.text),
                RATE_IOPS_MAX as u64
            ),
        ));
    }
    Ok(())
}

/// rd `iorate=`: `max`, `curve`, a number, or a list / range of numbers (and `max`).
fn iorate(value: &Value) -> Result<IorateSpec> {
    const EXPECTED: &str =
        "iorate=max, iorate=curve, a number of I/Os per second or a list (100,200,…)";
    let point = |s: &Scalar| -> Result<Rate> {
        match s.text.to_ascii_lowercase().as_str() {
            "max" => Ok(Rate::Max),
            "curve" => Err(Error::at(
                s.pos,
                "iorate=curve inside a list; expected iorate=curve on its own",
            )),
            _ => {
                let n = value::number(s, EXPECTED)?;
                if n == 0.0 {
                    return Err(Error::at(
                        s.pos,
                        "iorate=0; expected a rate above 0, or max",
                    ));
                }
                check_rate_max(s, n)?;
                Ok(Rate::Fixed(n))
            }
        }
    };
    if let Value::Scalar(s) = value {
        if s.text.eq_ignore_ascii_case("curve") {
            return Ok(IorateSpec::Curve);
        }
        return Ok(IorateSpec::Points(vec![point(s)?]));
    }
    if value::is_range(value)? {
        let values = value::expand(value, &|s| {
            let n = value::number(s, EXPECTED)?;
            if n == 0.0 {
                return Err(Error::at(s.pos, "iorate=0; expected a rate above 0"));
            }
            check_rate_max(s, n)?;
            Ok(n)
        })?;
        return Ok(IorateSpec::Points(
            values.into_iter().map(|(n, _)| Rate::Fixed(n)).collect(),
        ));
    }
    Ok(IorateSpec::Points(
        value.elements().iter().map(point).collect::<Result<_>>()?,
    ))
}

/// rd `curve=`: the points of a curve, in % of its max rate.
fn curve_points(value: &Value) -> Result<Vec<f64>> {
    let points = value::expand(value, &|s| {
        let p = value::percent(s, "a curve point")?;
        if p == 0.0 {
            return Err(Error::at(
                s.pos,
                "curve point 0%; expected percentages of the max rate above 0",
            ));
        }
        Ok(p)
    })?;
    Ok(points.into_iter().map(|(p, _)| p).collect())
}

/// rd `elapsed=` or `interval=` (`key`): a time above 0; an interval no
/// shorter than [`INTERVAL_MIN`].
fn elapsed_or_interval(s: &Scalar, key: &str) -> Result<Duration> {
    let d = value::duration(s, key)?;
    if d.is_zero() {
        return Err(Error::at(
            s.pos,
            format!("{key}=0; expected a time above 0"),
        ));
    }
    if key == "interval" && d < INTERVAL_MIN {
        return Err(Error::at(
            s.pos,
            format!(
                "interval={} is shorter than {} s, the shortest interval (each one samples the CPU and the disks and gathers every thread's histograms); expected at least {}, such as 1",
                clean(&s.text),
                fmt_num(INTERVAL_MIN.as_secs_f64()),
                fmt_num(INTERVAL_MIN.as_secs_f64())
            ),
        ));
    }
    Ok(d)
}

/// rd `distribution=`: how open-loop arrivals are spaced.
fn arrival(s: &Scalar) -> Result<Arrival> {
    Ok(match s.text.to_ascii_lowercase().as_str() {
        "exponential" => Arrival::Exponential,
        "uniform" => Arrival::Uniform,
        "deterministic" => Arrival::Deterministic,
        _ => {
            return Err(Error::at(
                s.pos,
                format!(
                    "distribution=`{}`; expected exponential, uniform or deterministic",
                    clean(&s.text)
                ),
            ))
        }
    })
}

/// rd `forthreads=`: outstanding I/Os per sd, each a whole number from 1 to
/// [`THREADS_MAX`] (a range's steps included).
fn for_threads(value: &Value) -> Result<Vec<u32>> {
    let values = value::expand(value, &|s| {
        #[allow(clippy::cast_precision_loss)]
        value::whole_in(s, "threads", 1, THREADS_MAX).map(|n| n as f64)
    })?;
    let mut threads = Vec::with_capacity(values.len());
    for (n, at) in values {
        #[allow(clippy::cast_precision_loss)]
        let in_range = (1.0..=THREADS_MAX as f64).contains(&n);
        if n.fract() != 0.0 || !in_range {
            return Err(Error::at(
                at,
                format!(
                    "threads {} from this range is not a whole number from 1 to {THREADS_MAX}",
                    fmt_num(n)
                ),
            ));
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        threads.push(n as u32);
    }
    Ok(threads)
}

/// rd `forxfersize=`: transfer sizes, each a whole multiple of 512 bytes (a
/// range's steps included).
fn for_xfersizes(value: &Value) -> Result<Vec<u64>> {
    let values = value::expand(value, &|s| {
        #[allow(clippy::cast_precision_loss)]
        value::xfer_bytes(s, "xfersize").map(|n| n as f64)
    })?;
    let mut sizes = Vec::with_capacity(values.len());
    for (n, at) in values {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let bytes = n as u64;
        #[allow(clippy::cast_precision_loss)]
        let exact = bytes as f64 == n;
        if !exact || !bytes.is_multiple_of(512) {
            return Err(Error::at(
                at,
                format!("xfersize {} from this range is not a multiple of 512 bytes; expected a step that is", fmt_num(n)),
            ));
        }
        sizes.push(bytes);
    }
    Ok(sizes)
}

/// rd `forrdpct=`: read percentages, none over 100.
fn for_rdpcts(value: &Value) -> Result<Vec<f64>> {
    let values = value::expand(value, &|s| value::percent(s, "rdpct"))?;
    if let Some((n, at)) = values.iter().find(|(n, _)| *n > 100.0) {
        return Err(Error::at(
            *at,
            format!("rdpct {} from this range is over 100", fmt_num(*n)),
        ));
    }
    Ok(values.into_iter().map(|(n, _)| n).collect())
}

/// `histogram=(default,b1,b2,…)`: bucket bounds in µs, increasing.
fn histogram(value: &Value) -> Result<Vec<u64>> {
    let items = value.elements();
    let bounds = match items.first() {
        Some(first) if first.text.eq_ignore_ascii_case("default") => &items[1..],
        _ => items,
    };
    let mut out: Vec<u64> = Vec::with_capacity(bounds.len());
    for s in bounds {
        let n = value::whole(s, "a histogram bucket bound in µs")?;
        if n == 0 {
            return Err(Error::at(
                s.pos,
                "histogram bound 0 µs; expected bounds above 0",
            ));
        }
        if let Some(&last) = out.last() {
            if n <= last {
                return Err(Error::at(
                    s.pos,
                    format!(
                        "histogram bound {n} µs does not follow {last}; expected increasing bounds"
                    ),
                ));
            }
        }
        out.push(n);
    }
    Ok(out)
}

fn unknown_in_record(record: &Record, item: &Item) -> Error {
    let kind = record.kind;
    let key = item.key.as_str();
    let shown = clean(&record.name);
    let message = if kind.unsupported().contains(&key) {
        format!(
            "{k} parameter `{key}` is not supported by Cairn{}; supported: {}",
            unsupported_hint(Some(kind), key),
            kind.keys().join(", "),
            k = kind.name()
        )
    } else if let Some(other) = Kind::from_key(key) {
        format!(
            "`{key}=` inside {k} `{shown}`; expected each {o}= record to start its own line",
            k = kind.name(),
            o = other.name()
        )
    } else if GENERAL_KEYS.contains(&key) {
        format!(
            "`{key}=` is a general parameter, found inside {k} `{shown}`; expected it before the first sd=",
            k = kind.name()
        )
    } else {
        format!(
            "unknown {} parameter `{}`; expected one of {}",
            kind.name(),
            clean(key),
            kind.keys().join(", ")
        )
    };
    Error::at(item.key_pos, message)
}

fn unknown_general(item: &Item) -> Error {
    let key = item.key.as_str();
    let message = if GENERAL_UNSUPPORTED.contains(&key) {
        format!(
            "general parameter `{key}` is not supported by Cairn{}; supported: {}",
            unsupported_hint(None, key),
            GENERAL_KEYS.join(", ")
        )
    } else if let Some(kind) = Kind::from_key(key) {
        format!(
            "`{key}=` in the middle of a line; expected each {}= record to start its own line",
            kind.name()
        )
    } else if [SD_KEYS, WD_KEYS, RD_KEYS]
        .iter()
        .any(|keys| keys.contains(&key))
    {
        format!("`{key}=` before any sd=, wd= or rd= record; expected it inside a record, e.g. after sd=NAME,")
    } else {
        format!(
            "unknown general parameter `{}`; expected one of {}, or a record starting sd=, wd= or rd=",
            clean(key),
            GENERAL_KEYS.join(", ")
        )
    };
    Error::at(item.key_pos, message)
}
