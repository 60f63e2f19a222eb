//! Group attributes (`cairn group get` / `set`): the keys a group knows,
//! their defaults and ranges, kept in the attributes metadata file (one
//! block, through the journal like every metadata change).

use super::error::GroupError;
use super::mounted::Group;
use super::parts::members::Member;
use super::parts::settings::Refused;
use super::parts::txn::Dirty;

/// What a key accepts, for the refusal that lists the keys.
#[derive(Debug, Clone, Copy)]
pub struct AttributeSpec {
    pub name: &'static str,
    /// Shown when the group has no value of its own.
    pub default: &'static str,
    /// `None`: fixed when the group is made (shown, never set).
    pub range: Option<&'static str>,
    pub about: &'static str,
}

/// Every attribute a group has.
pub const ATTRIBUTES: &[AttributeSpec] = &[
    AttributeSpec {
        name: "disk_repair_time",
        default: "3.6h",
        range: Some("a duration from 0 to 365d: a number with s, m, h or d (hours if none)"),
        about: "how long an OFFLINE disk may stay offline (counted while the group is mounted) before it is dropped and its copies rebuilt elsewhere",
    },
    AttributeSpec {
        name: "disk_io_timeout",
        default: "30s",
        range: Some("a duration from 1s to 60m: a number with ms, s or m (seconds if none)"),
        about: "how long a read, write or flush may go unanswered before its disk is taken OFFLINE as if it had failed (a path that hangs rather than fails)",
    },
    AttributeSpec {
        name: "rebalance_compact",
        default: "auto",
        range: Some("auto, true or false (auto: only where every disk is rotational)"),
        about: "whether a rebalance ends with a compact pass that moves data towards the start of each disk",
    },
    AttributeSpec {
        name: "thin_provisioned",
        default: "auto",
        range: Some("auto, true or false (auto: where every disk in service accepts discard)"),
        about: "whether AUs are discarded as they are freed, handing the space back to a thin array; off, freed space stays returnable by `cairn group reclaim`",
    },
    AttributeSpec {
        name: "au_size",
        default: "",
        range: None,
        about: "allocation unit in bytes",
    },
    AttributeSpec {
        name: "sector_size",
        default: "",
        range: None,
        about: "logical sector size in bytes",
    },
    AttributeSpec {
        name: "compatible.cairn",
        default: "0.1",
        range: None,
        about: "the Cairn version whose format the group uses",
    },
    AttributeSpec {
        name: "content.type",
        default: "data",
        range: None,
        about: "what the group holds",
    },
];

/// The longest `disk_repair_time`.
const REPAIR_TIME_MAX_SECONDS: u64 = 365 * 86_400;

pub use super::limits::DISK_IO_TIMEOUT_DEFAULT;
/// The shortest `disk_io_timeout`: below a second a busy but healthy disk
/// (a queue of large writes, a flush behind them) would be taken offline.
const IO_TIMEOUT_MIN_MS: u64 = 1_000;
/// The longest: past an hour the service is as good as hung.
const IO_TIMEOUT_MAX_MS: u64 = 3_600_000;

/// Milliseconds in an I/O timeout: a number (fractions allowed) with a
/// unit `ms`, `s` or `m`; seconds when there is none. From 1s to 60m.
pub fn parse_io_timeout(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (number, unit) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&t[..i], &t[i..]),
        None => (t.as_str(), "s"),
    };
    let scale = match unit {
        "ms" => 1.0,
        "s" | "sec" => 1_000.0,
        "m" | "min" => 60_000.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use ms, s or m)")),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (a number with ms, s or m)"))?;
    if !value.is_finite() {
        return Err(format!(
            "{text:?} is not a duration (a number with ms, s or m)"
        ));
    }
    let ms = (value * scale).round();
    if ms < IO_TIMEOUT_MIN_MS as f64 || ms > IO_TIMEOUT_MAX_MS as f64 {
        return Err(format!(
            "{text:?} is out of range: an I/O timeout is from 1s to 60m"
        ));
    }
    Ok(ms as u64)
}

/// Seconds in a duration: a number (fractions allowed) with a unit `s`,
/// `m`, `h` or `d`; hours when there is none (as ASM's `disk_repair_time`).
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (number, unit) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&t[..i], &t[i..]),
        None => (t.as_str(), "h"),
    };
    let scale = match unit {
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" | "hr" => 3600.0,
        "d" | "day" | "days" => 86_400.0,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (use s, m, h or d)"
            ))
        }
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (a number with s, m, h or d)"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{text:?}: a duration is a number of 0 or more"));
    }
    let seconds = (value * scale).round();
    if value > 0.0 && seconds < 1.0 {
        return Err(format!(
            "{text:?} is under a second: the repair timer counts whole seconds (give 1s or more, or 0 to drop a failed disk at once)"
        ));
    }
    if seconds > REPAIR_TIME_MAX_SECONDS as f64 {
        return Err(format!("{text:?} is longer than 365d"));
    }
    Ok(seconds as u64)
}

/// `value` for `key`, made canonical, or why it is refused.
fn validate(key: &str, value: &str) -> Result<String, String> {
    match key {
        "disk_repair_time" => {
            parse_duration(value)?;
            Ok(value.trim().to_ascii_lowercase())
        }
        "disk_io_timeout" => {
            parse_io_timeout(value)?;
            Ok(value.trim().to_ascii_lowercase())
        }
        "rebalance_compact" | "thin_provisioned" => {
            match value.trim().to_ascii_lowercase().as_str() {
                v @ ("auto" | "true" | "false") => Ok(v.to_string()),
                _ => Err(format!("{value:?}: use auto, true or false")),
            }
        }
        _ => Err("fixed when the group is made".into()),
    }
}

/// A setting the attributes block cannot hold, as the command's error.
pub(super) fn refused(why: Refused) -> GroupError {
    match why {
        Refused::Full(why) => GroupError::NoSpace(why),
        Refused::TooLong(why) => GroupError::Invalid(why),
    }
}

/// The keys and what they take, for a refusal.
fn keys_help() -> String {
    ATTRIBUTES
        .iter()
        .map(|a| match a.range {
            Some(r) => format!("{} ({r})", a.name),
            None => format!("{} (fixed)", a.name),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Group<'_> {
    /// The value of attribute `key` (the group's own, else the default),
    /// `None` for a key no group has.
    pub fn attribute(&self, key: &str) -> Option<String> {
        let spec = ATTRIBUTES.iter().find(|a| a.name == key)?;
        Some(
            self.settings
                .attribute(key)
                .map_or_else(|| spec.default.to_string(), str::to_string),
        )
    }

    /// Attributes by key (every one when `keys` is empty), refusing an
    /// unknown key with the list of keys.
    pub fn get_attributes(&self, keys: &[String]) -> Result<Vec<(String, String)>, GroupError> {
        if keys.is_empty() {
            return Ok(ATTRIBUTES
                .iter()
                .filter_map(|a| Some((a.name.to_string(), self.attribute(a.name)?)))
                .collect());
        }
        keys.iter()
            .map(|k| {
                let key = k.trim().to_ascii_lowercase();
                self.attribute(&key)
                    .map(|v| (key, v))
                    .ok_or_else(|| unknown_key(k))
            })
            .collect()
    }

    /// Set attributes: every pair is checked before any is set, and all are
    /// set in one commit.
    pub fn set_attributes(&mut self, pairs: &[(String, String)]) -> Result<(), GroupError> {
        self.check_writable()?;
        let mut checked = Vec::new();
        for (k, v) in pairs {
            let key = k.trim().to_ascii_lowercase();
            if !ATTRIBUTES.iter().any(|a| a.name == key) {
                return Err(unknown_key(k));
            }
            let value = validate(&key, v).map_err(|why| {
                GroupError::Invalid(format!(
                    "attribute {key}={v}: {why}; the keys are: {}",
                    keys_help()
                ))
            })?;
            checked.push((key, value));
        }
        self.settings.attributes_fit(&checked).map_err(refused)?;
        for (key, value) in checked {
            self.settings.set_attribute(&key, value).map_err(refused)?;
        }
        self.txn.mark(Dirty::Attributes);
        self.commit()?;
        self.apply_io_timeout();
        Ok(())
    }

    /// `disk_io_timeout`.
    pub fn disk_io_timeout(&self) -> std::time::Duration {
        self.attribute("disk_io_timeout")
            .and_then(|v| parse_io_timeout(&v).ok())
            .map_or(DISK_IO_TIMEOUT_DEFAULT, std::time::Duration::from_millis)
    }

    /// Give the metadata plane's engine, and through the data plane every
    /// data handle's (at its next operation), the group's I/O timeout.
    pub(super) fn apply_io_timeout(&mut self) {
        let timeout = self.disk_io_timeout();
        self.engine.set_io_timeout(Some(timeout));
        self.plane.set_io_timeout(timeout);
    }

    /// Whether freed AUs are discarded as they are freed:
    /// `thin_provisioned` true, or auto (the default) and every disk in
    /// service accepts discard. Off, they stay returnable (a reclaim gives
    /// them back later); nothing else depends on it.
    pub fn discards_on_free(&self) -> bool {
        match self.attribute("thin_provisioned").as_deref() {
            Some("true") => true,
            Some("false") => false,
            _ => self.every_disk_in_service(|g| {
                matches!(
                    g.discard,
                    cairn_io::geometry::DiscardSupport::Supported { .. }
                )
            }),
        }
    }

    /// Whether there is a disk in service and every one's geometry says
    /// `what` (the `auto` of `thin_provisioned` and `rebalance_compact`).
    pub(super) fn every_disk_in_service(
        &self,
        what: impl Fn(&cairn_io::geometry::Geometry) -> bool,
    ) -> bool {
        let mut disks = self.members.iter().filter_map(Member::online).peekable();
        disks.peek().is_some() && disks.all(|d| self.engine.geometry(d).is_some_and(&what))
    }

    /// `disk_repair_time`, in seconds.
    pub fn disk_repair_seconds(&self) -> u64 {
        self.attribute("disk_repair_time")
            .and_then(|v| parse_duration(&v).ok())
            .unwrap_or(12_960)
    }
}

fn unknown_key(key: &str) -> GroupError {
    GroupError::Invalid(format!(
        "no attribute {key:?}; the keys are: {}",
        keys_help()
    ))
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_io_timeout};

    #[test]
    #[allow(clippy::unwrap_used)]
    fn io_timeouts_parse_in_their_range_and_refuse_the_rest() {
        assert_eq!(parse_io_timeout("30s"), Ok(30_000));
        assert_eq!(parse_io_timeout("30"), Ok(30_000));
        assert_eq!(parse_io_timeout("1500ms"), Ok(1_500));
        assert_eq!(parse_io_timeout("2m"), Ok(120_000));
        assert_eq!(parse_io_timeout("1.5"), Ok(1_500));
        for bad in ["0", "999ms", "61m", "-1s", "1h", "fast", "NaN", "inf"] {
            let why = parse_io_timeout(bad).unwrap_err();
            assert!(why.contains(&format!("{bad:?}")), "{bad}: {why}");
        }
    }

    #[test]
    fn durations_parse_as_asm_gives_them() {
        assert_eq!(parse_duration("3.6h"), Ok(12_960));
        assert_eq!(parse_duration("3.6"), Ok(12_960));
        assert_eq!(parse_duration("90m"), Ok(5_400));
        assert_eq!(parse_duration("45s"), Ok(45));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        assert_eq!(parse_duration("0"), Ok(0));
        // Never rounded to 0 (which drops a failed disk at once).
        let e = parse_duration("0.4s").unwrap_err();
        assert!(e.contains("under a second"), "{e}");
        assert!(parse_duration("0.0001h").is_err());
        assert_eq!(parse_duration("0.6s"), Ok(1));
        assert!(parse_duration("-1h").is_err());
        assert!(parse_duration("1y").is_err());
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("400d").is_err());
        assert!(parse_duration("NaN").is_err());
    }
}
