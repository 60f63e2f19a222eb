//! `cairn cp`: which way a copy goes, and what this process opens with its
//! own rights before the executor (here or in the service) does the group's
//! side.
//!
//! - **Into a group**: the source is opened first (a FIFO waiting for its
//!   writer holds no lock). A regular file or a block device is opened
//!   before it is known who copies, and handed to the service if one holds
//!   the group; standard input too. A FIFO is not (opening it waits for its
//!   writer and takes its data before it is known who copies): it is copied
//!   by this process's own executor.
//! - **Out of a group**: from a service, the file is read through its file
//!   system with this user's rights; else the destination is made ready
//!   (the overwrite protections, a temporary, a FIFO's open waiting for its
//!   reader: none of it holds a lock) before the group is mounted.
//! - **Between groups**: by whichever host reaches both; from a service
//!   that holds only the source, read through its file system and copied
//!   in from there.

use std::io::IsTerminal;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use anyhow::{Context, Result};
use cairn_command::request::Request;
use cairn_command::{Input, Outcome, Reply};
use cairn_store::file_copy;
use cairn_store::names::GroupPath;

use crate::args::EngineArg;

/// A `cp` as the command line asks for it.
pub(crate) struct Copy {
    pub(crate) source: String,
    pub(crate) dest: String,
    pub(crate) template: Option<String>,
    pub(crate) redundancy: Option<String>,
    pub(crate) max_bytes: Option<u64>,
    pub(crate) force: bool,
    pub(crate) discover: Option<String>,
    pub(crate) engine: EngineArg,
}

impl Copy {
    pub(crate) fn run(self) -> Result<Outcome> {
        match (self.source.starts_with('+'), self.dest.starts_with('+')) {
            (true, true) => self.between(),
            (true, false) => self.out(),
            (false, true) => self.in_from(None),
            (false, false) => anyhow::bail!(
                "one of {} and {} must be a group path (+GROUP/...); use cp for OS files",
                self.source,
                self.dest
            ),
        }
    }

    fn request(&self, request: Request, input: Input, fds: &[BorrowedFd<'_>]) -> Result<Reply> {
        crate::carry::request_reply(
            request,
            self.discover.as_deref(),
            false,
            self.engine,
            input,
            fds,
        )
    }

    /// Into a group, from an OS source (`via`: a file read through a
    /// service's file system, and its template, for a copy between groups).
    fn in_from(&self, via: Option<(std::path::PathBuf, String)>) -> Result<Outcome> {
        let (source_text, template) = match &via {
            Some((path, template)) => (
                path.display().to_string(),
                self.template.clone().or(Some(template.clone())),
            ),
            None => (self.source.clone(), self.template.clone()),
        };
        // What can be opened before it is known who copies: standard input,
        // a regular file, a block device. A FIFO (or what cannot be opened)
        // is opened by this process's own copy, which says why.
        let early: Option<std::fs::File> = match source_text.as_str() {
            "-" => None,
            s => {
                use std::os::unix::fs::FileTypeExt;
                std::fs::metadata(s)
                    .ok()
                    .filter(|m| m.file_type().is_file() || m.file_type().is_block_device())
                    .and_then(|_| std::fs::File::open(s).ok())
            }
        };
        let name = match (&via, source_text.as_str()) {
            (Some(_), _) => GroupPath::parse(&self.source)
                .ok()
                .and_then(|p| p.file_name().map(|c| c.as_str().to_string())),
            (None, "-") => None,
            (None, s) => std::path::Path::new(s)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned()),
        };
        let request = Request::CpIn {
            source: if source_text == "-" {
                "standard input".into()
            } else {
                source_text.clone()
            },
            source_name: name.clone(),
            dest: self.dest.clone(),
            template,
            redundancy: self.redundancy.clone(),
            max_bytes: self.max_bytes,
        };
        // The service gets a descriptor of its own: `early` becomes this
        // process's source, for when no service takes the command.
        let handed: Option<OwnedFd> = early
            .as_ref()
            .map(|f| f.as_fd().try_clone_to_owned())
            .transpose()
            .with_context(|| format!("cannot hand {source_text} to the service"))?;
        let stdin = std::io::stdin();
        let fds: Vec<BorrowedFd<'_>> = match (&handed, source_text.as_str()) {
            (Some(f), _) => vec![f.as_fd()],
            (None, "-") => vec![stdin.as_fd()],
            // A FIFO: not handed over (see the module's header).
            (None, _) => Vec::new(),
        };
        let source = match early {
            Some(f) => file_copy::Source::opened(f, &source_text, name)?,
            None => file_copy::open_source(&source_text, &mut |fifo| {
                if std::io::stderr().is_terminal() {
                    eprintln!(
                        "cairn: {fifo} is a FIFO; waiting for a writer (Ctrl-C stops, leaving nothing)"
                    );
                }
            })?,
        };
        let input = Input {
            source: Some(source),
            destination: None,
        };
        let reply = if fds.is_empty() {
            // Never handed to a service: carried out here, whoever holds
            // the group (a service's lock refuses this mount, saying so).
            let mut shown = crate::show::Shown::new(false);
            crate::carry::execute_here(
                request,
                self.discover.as_deref(),
                self.engine,
                input,
                &mut shown,
            )?
        } else {
            self.request(request, input, &fds)?
        };
        if let Reply::CopiedIn {
            bytes_copied,
            stopped_at_max: true,
            ..
        } = &reply
        {
            eprintln!(
                "cairn: note: stopped at --max-size ({bytes_copied} bytes); {} had more",
                self.source
            );
        }
        crate::show::reply(&reply, false)
    }

    /// Out of a group to an OS destination.
    fn out(&self) -> Result<Outcome> {
        let host = cairn_io::host::Host::real();
        let path = GroupPath::parse(&self.source)?;
        let name = path
            .file_name()
            .map(|c| c.as_str().to_string())
            .with_context(|| format!("{} is the group's root; name a file in it", self.source))?;
        let request = Request::CpOut {
            source: self.source.clone(),
            dest: self.dest.clone(),
        };
        // A service answers first (with where to read the file); else the
        // destination is made ready before this process mounts the group.
        let d = crate::args::discovery(self.discover.as_deref())
            .map(|d| d.text)
            .unwrap_or_default();
        let mut shown = crate::show::Shown::new(false);
        match crate::forward::forward(&request, &d, &[], &mut shown) {
            Some(Ok(Reply::ReadThrough { path: at, .. })) => {
                shown.finish();
                return self.out_through(&at, &name);
            }
            Some(Ok(reply)) => return crate::show::reply(&reply, false),
            Some(Err(refused)) => return Err(refused.into()),
            None => {}
        }
        let target = file_copy::resolve_destination(&self.dest, &name)?;
        let prepared = file_copy::prepare_destination(&target, &host, self.force)?;
        let input = Input {
            source: None,
            destination: Some(prepared),
        };
        let reply = crate::carry::execute_here(
            request,
            self.discover.as_deref(),
            self.engine,
            input,
            &mut shown,
        )?;
        shown.finish();
        crate::show::reply(&reply, false)
    }

    /// Out of a group a service holds: the service said the file is there;
    /// it is read through the service's file system at `at`, with this
    /// user's rights, and written (checked, through a temporary, named at
    /// the end) as a copy out of a group this process mounted would be.
    fn out_through(&self, at: &std::path::Path, name: &str) -> Result<Outcome> {
        let host = cairn_io::host::Host::real();
        let target = file_copy::resolve_destination(&self.dest, name)?;
        let prepared = file_copy::prepare_destination(&target, &host, self.force)?;
        let file = std::fs::File::open(at).with_context(|| {
            format!(
                "cannot read {} through the Cairn service's file system (it serves only its own user unless started with --allow-other)",
                at.display()
            )
        })?;
        let size = file.metadata()?.len();
        let mut served = file_copy::ServedFile {
            file,
            shown_as: at.display().to_string(),
        };
        let bar = crate::show::bytes_progress(false, size);
        let copied = file_copy::copy_out(&mut served, 0, size, prepared, &mut |done, _| {
            bar.set_position(done)
        });
        bar.finish_and_clear();
        copied?;
        Ok(Outcome::Done)
    }

    /// From a group file to a group.
    fn between(&self) -> Result<Outcome> {
        let request = Request::CpBetween {
            source: self.source.clone(),
            dest: self.dest.clone(),
            template: self.template.clone(),
            redundancy: self.redundancy.clone(),
        };
        match self.request(request, Input::default(), &[])? {
            // The source's service does not hold the destination: read
            // through its file system, copied in as a file.
            Reply::ReadThrough { path, template } => self.in_from(Some((path, template))),
            reply => crate::show::reply(&reply, false),
        }
    }
}
