//! The words of a parameter file: the keys each part of it takes (general
//! parameters, `sd`, `wd` and `rd` records), the aliases an `rd` accepts, and
//! the vdbench keys Cairn knows of and does not support, each with a hint of
//! what to write instead. Tables only: the parser checks items against them.

pub(super) const GENERAL_KEYS: &[&str] = &[
    "data_errors",
    "compratio",
    "dedupratio",
    "dedupunit",
    "validate",
    "histogram",
    "include",
];
pub(super) const SD_KEYS: &[&str] = &[
    "lun",
    "size",
    "threads",
    "openflags",
    "offset",
    "align",
    "range",
];
pub(super) const WD_KEYS: &[&str] = &[
    "sd", "rdpct", "xfersize", "seekpct", "skew", "iorate", "priority", "range", "hotband",
];
pub(super) const RD_KEYS: &[&str] = &[
    "wd",
    "iorate",
    "curve",
    "stopcurve",
    "elapsed",
    "interval",
    "warmup",
    "distribution",
    "forthreads",
    "forxfersize",
    "forrdpct",
    "forseekpct",
    "pause",
];
/// vdbench's rd takes `threads=` for `forthreads=` and likewise for the others.
pub(super) const RD_ALIASES: &[(&str, &str)] = &[
    ("threads", "forthreads"),
    ("xfersize", "forxfersize"),
    ("rdpct", "forrdpct"),
    ("seekpct", "forseekpct"),
];

/// vdbench parameters Cairn knows of and does not support: named as such
/// (rather than "unknown") so the user knows the file is right but the tool is not.
pub(super) const GENERAL_UNSUPPORTED: &[&str] = &[
    "hd",
    "host",
    "fsd",
    "fwd",
    "messagescan",
    "report",
    "debug",
    "journal",
    "concatenatesds",
    "patterns",
    "pattern",
    "create_anchors",
    "dedupsets",
    "dedupflipflop",
    "deduphotsets",
    "showlba",
    "formatsds",
    "formatxfersize",
    "loop",
    "startcmd",
    "start_cmd",
    "endcmd",
    "end_cmd",
    "monitor",
    "port",
    "abort_failed_skew",
    "timeout",
    "fifo",
    "openflags",
    "compression",
    "force_error_after",
    "heartbeat_error",
    "report_run_totals",
    "ios_per_jvm",
];
pub(super) const SD_UNSUPPORTED: &[&str] = &[
    "host",
    "hd",
    "count",
    "hitarea",
    "journal",
    "streams",
    "resetbus",
    "resetlun",
    "replay",
    "dedupratio",
    "compratio",
];
pub(super) const WD_UNSUPPORTED: &[&str] = &[
    "host",
    "hd",
    "rhpct",
    "whpct",
    "stride",
    "streams",
    "openflags",
    "threads",
    "compratio",
    "dedupratio",
];
pub(super) const RD_UNSUPPORTED: &[&str] = &[
    "sd",
    "fwd",
    "fwdrate",
    "format",
    "operation",
    "operations",
    "foroperations",
    "maxdata",
    "openflags",
    "startcmd",
    "start_cmd",
    "endcmd",
    "end_cmd",
    "hitarea",
    "forhitarea",
    "rhpct",
    "forrhpct",
    "whpct",
    "forwhpct",
    "hpct",
    "forhpct",
    "compratio",
    "forcompratio",
    "forwidth",
    "fordepth",
    "forfiles",
    "forsizes",
    "fortotal",
    "forstreams",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Sd,
    Wd,
    Rd,
}

impl Kind {
    pub(super) fn from_key(key: &str) -> Option<Kind> {
        match key {
            "sd" => Some(Kind::Sd),
            "wd" => Some(Kind::Wd),
            "rd" => Some(Kind::Rd),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Sd => "sd",
            Kind::Wd => "wd",
            Kind::Rd => "rd",
        }
    }

    pub(super) fn keys(self) -> &'static [&'static str] {
        match self {
            Kind::Sd => SD_KEYS,
            Kind::Wd => WD_KEYS,
            Kind::Rd => RD_KEYS,
        }
    }

    pub(super) fn unsupported(self) -> &'static [&'static str] {
        match self {
            Kind::Sd => SD_UNSUPPORTED,
            Kind::Wd => WD_UNSUPPORTED,
            Kind::Rd => RD_UNSUPPORTED,
        }
    }
}

pub(super) fn unsupported_hint(kind: Option<Kind>, key: &str) -> &'static str {
    match (kind, key) {
        (_, "hd" | "host") => "; Cairn runs workloads on this host only",
        (_, "fsd" | "fwd" | "fwdrate" | "format") => {
            "; file-system workloads are not supported: name each file as an sd's lun="
        }
        (None, "openflags") => "; expected openflags= on each sd (or on sd=default)",
        (Some(Kind::Wd), "openflags") => "; expected openflags= on the sd",
        (Some(Kind::Wd), "threads") => "; threads= goes on the sd, or forthreads= on the rd",
        (Some(Kind::Rd), "sd") => "; name the sds on the wd",
        (Some(_), "compratio" | "forcompratio" | "dedupratio") => {
            "; expected it as a general parameter before the first sd="
        }
        _ => "",
    }
}
