//! Which section a table is: by its `summary` where Oracle's wording is
//! known, else by the title before it, else by its column headings.

use super::document::Table;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Header,
    CacheSizes,
    LoadProfile,
    TopEvents,
    Foreground,
    Background,
    WaitClasses,
    ForegroundWaitClass,
    Histogram,
    IoProfile,
    Activity,
    IoStatFunction,
    InitOra,
    Other,
}

pub(super) fn classify(t: &Table) -> Kind {
    let s = t.summary.to_ascii_lowercase();
    let title = t.title.to_ascii_lowercase();
    let first_heading = t
        .rows
        .iter()
        .find(|r| r.heading)
        .map(|r| {
            r.cells
                .iter()
                .map(|c| c.to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let has_heading = |h: &str| first_heading.iter().any(|c| c == h);

    if s.contains("database instance information")
        || s.contains("instance information")
        || s.contains("host information")
        || s.contains("snapshot information")
        || s.contains("container information")
        || has_heading("db name")
        || has_heading("host name")
        || has_heading("snap id")
    {
        return Kind::Header;
    }
    if s.contains("cache sizes") || title.starts_with("cache sizes") {
        return Kind::CacheSizes;
    }
    if s.contains("load profile") && !s.contains("io profile") {
        return Kind::LoadProfile;
    }
    if s.contains("top 10 wait events")
        || s.contains("top 5 timed")
        || title.starts_with("top 5 timed")
        || title.starts_with("top 10 foreground events")
    {
        return Kind::TopEvents;
    }
    if s.contains("wait class statistics ordered by total wait time")
        || title.starts_with("wait classes by total wait time")
    {
        return Kind::WaitClasses;
    }
    if s.contains("foreground wait class") || title == "foreground wait class" {
        return Kind::ForegroundWaitClass;
    }
    if s.contains("foreground wait events") || title == "foreground wait events" {
        return Kind::Foreground;
    }
    if s.contains("background wait events") || title == "background wait events" {
        return Kind::Background;
    }
    if title.starts_with("wait event histogram") || (s.contains("histogram") && s.contains("wait"))
    {
        return Kind::Histogram;
    }
    if title.starts_with("io profile")
        || s.contains("io profile")
        || first_heading.iter().any(|h| h.starts_with("read+write"))
    {
        return Kind::IoProfile;
    }
    let activity_title = matches!(
        title.as_str(),
        "instance activity stats" | "key instance activity stats" | "other instance activity stats"
    );
    if activity_title
        || (s.contains("instance activity stat")
            && !s.contains("absolute")
            && !s.contains("thread"))
    {
        return Kind::Activity;
    }
    if title == "iostat by function summary"
        || (s.contains("iostat by function") && !s.contains("filetype"))
    {
        return Kind::IoStatFunction;
    }
    if title.starts_with("init.ora parameters")
        || title.starts_with("parameters modified by")
        || s.contains("init.ora")
    {
        return Kind::InitOra;
    }
    if s.starts_with("load profile") || title == "load profile" {
        return Kind::LoadProfile;
    }
    Kind::Other
}
