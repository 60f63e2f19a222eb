//! Where a command's output goes: this process's standard output and error,
//! or — for a command the service carries out — the control socket's client,
//! which prints it as its own. One rendering either way, so a command gives
//! the same text and the same JSON through the service as without it.

use std::fmt;
use std::io::Write;

use anyhow::Result;
use cairn_serve::control::{Replier, Reply};

pub(crate) enum Console<'a, 's> {
    /// This process's stdout and stderr.
    Std,
    /// The client of a control-socket connection (once it is gone — it
    /// stopped reading, or went away — what follows goes to the log).
    Remote(&'a mut Replier<'s>),
    /// The service's log: a background operation's output once its client
    /// has been answered (standard output as info, standard error as
    /// warnings).
    Log,
}

impl Console<'_, '_> {
    /// Text for standard output.
    pub(crate) fn out(&mut self, text: fmt::Arguments<'_>) {
        match self {
            Console::Std => print!("{text}"),
            Console::Remote(r) if !r.gone() => r.send(&Reply::Out(text.to_string())),
            Console::Remote(_) | Console::Log => {
                for line in text.to_string().lines().filter(|l| !l.is_empty()) {
                    tracing::info!("{line}");
                }
            }
        }
    }

    /// One line for standard error.
    pub(crate) fn err(&mut self, line: fmt::Arguments<'_>) {
        match self {
            Console::Std => eprintln!("{line}"),
            Console::Remote(r) if !r.gone() => r.send(&Reply::Err(line.to_string())),
            Console::Remote(_) | Console::Log => tracing::warn!("{line}"),
        }
    }

    /// `cp` out: where the client reads the file (through the mount).
    pub(crate) fn read_through(&mut self, path: &std::path::Path) {
        if let Console::Remote(r) = self {
            r.send(&Reply::ReadThrough(path.display().to_string()));
        }
    }

    /// The template of the file a copy between groups reads (before its
    /// `read_through`).
    pub(crate) fn source_template(&mut self, template: &str) {
        if let Console::Remote(r) = self {
            r.send(&Reply::SourceTemplate(template.to_string()));
        }
    }

    /// Progress of a long operation (`unit`: "AU" or "byte"), for a client
    /// to draw; this process draws its own bars.
    pub(crate) fn progress(&mut self, what: &str, unit: &str, done: u64, total: u64) {
        if let Console::Remote(r) = self {
            r.send(&Reply::Progress(cairn_serve::control::Progress {
                what: what.into(),
                unit: unit.into(),
                done,
                total,
            }));
        }
    }

    /// A value as pretty JSON, and a newline, on standard output.
    pub(crate) fn json(&mut self, value: &impl serde::Serialize) -> Result<()> {
        let mut text = serde_json::to_vec_pretty(value)?;
        text.push(b'\n');
        match self {
            Console::Std => {
                let mut out = std::io::stdout().lock();
                out.write_all(&text)?;
            }
            Console::Remote(r) if !r.gone() => {
                r.send(&Reply::Out(String::from_utf8_lossy(&text).into_owned()))
            }
            Console::Remote(_) | Console::Log => {
                tracing::info!("{}", String::from_utf8_lossy(&text).trim_end())
            }
        }
        Ok(())
    }
}

/// `outln!(c, ...)`: a line on the console's standard output.
macro_rules! outln {
    ($c:expr) => {
        $c.out(format_args!("\n"))
    };
    ($c:expr, $($arg:tt)*) => {
        $c.out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `out!(c, ...)`: text on the console's standard output.
macro_rules! out {
    ($c:expr, $($arg:tt)*) => {
        $c.out(format_args!($($arg)*))
    };
}

/// `errln!(c, ...)`: a line on the console's standard error.
macro_rules! errln {
    ($c:expr, $($arg:tt)*) => {
        $c.err(format_args!($($arg)*))
    };
}

pub(crate) use {errln, out, outln};
