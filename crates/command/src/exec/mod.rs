//! The executor: every command, once, over a [`Host`].
//!
//! [`execute`] checks the request ([`Request::validate`]) and the asker's
//! authority, then carries the command out on the group its host opens:
//! metadata operations under the live group's metadata lock, long
//! operations (resync, rebalance, scrub, reclaim) handed to the host to run
//! here or in the background. Whatever the host, the same code runs, so a
//! rule is enforced by both doors or by neither.

mod disks;
mod executor;
mod files;
mod group;
mod volume;

use crate::caller::Caller;
use crate::error::CommandError;
use crate::event::{Event, Events};
use crate::host::{Host, Opened};
use crate::reply::Reply;
use crate::request::{Authority, Request};

use executor::{no_service, Exec};

pub use disks::{attach_found, left_discovery, NotAttached};
pub use files::{CopySource, Input};
pub use group::summary_of;

/// Carry out `request` for `caller` on `host`, telling `events` as it goes.
/// `input`: what came with the request (the file `cp` copies in).
// Over 100 lines: a table from each request to the executor's method that carries it out; one arm per request kind.
pub fn execute(
    host: &dyn Host,
    caller: &Caller,
    request: Request,
    input: Input,
    events: &mut dyn Events,
) -> Result<Reply, CommandError> {
    request.validate()?;
    if request.authority() == Authority::Admin && !caller.admin {
        return Err(CommandError::Denied(format!(
            "permission denied: `cairn {}` changes the group or reads all of it, and only root, the service's own user or a member of its admin group (cairn serve --admin-group) may give it; user {} is not one",
            request.name(),
            caller.uid
        )));
    }
    let x = Exec { host, caller };
    match request {
        Request::GroupCreate {
            group,
            redundancy,
            disks,
            au_bytes,
            sector_bytes,
            force,
            take_from,
        } => x.create(
            group,
            &redundancy,
            &disks,
            (au_bytes, sector_bytes),
            (force, &take_from),
            events,
        ),
        Request::GroupList => x.list(events),
        Request::GroupDisks { group } => x.disks(&group, events),
        Request::GroupMount { group, force } => x.mount(&group, force, events),
        Request::GroupCheck { group, repair } => x.check(&group, repair, events),
        Request::GroupScrub {
            group,
            power,
            repair,
            prefer,
            wait,
        } => x.scrub(&group, power, (repair, prefer), wait, events),
        Request::GroupReclaim {
            group,
            explain,
            rate_bytes,
            power,
            way,
            force,
            compact,
            wait,
        } => x.reclaim(
            &group,
            group::reclaim_options(explain, rate_bytes, power, (way, force), compact),
            wait,
            events,
        ),
        Request::GroupSpace { group } => x.space(&group, events),
        Request::GroupOnline {
            group,
            disks,
            power,
            wait,
        } => x.online(&group, disks, power, wait, events),
        Request::GroupOffline {
            group,
            disks,
            drop_after_seconds,
        } => x.offline(&group, &disks, drop_after_seconds, events),
        Request::GroupAlter {
            group,
            add,
            drop,
            resize,
            power,
            explain,
            force,
            wait,
        } => x.alter(
            &group,
            (&add, &drop, &resize),
            (power, explain, force, wait),
            events,
        ),
        Request::GroupRebalance { group, power, wait } => x.rebalance(&group, power, wait, events),
        Request::GroupUndrop { group } => x.undrop(&group, events),
        Request::GroupDropDisk {
            group,
            disk,
            power,
            wait,
        } => x.drop_disk(&group, &disk, power, wait, events),
        Request::GroupReplace {
            group,
            disk,
            with,
            power,
            force,
            wait,
        } => x.replace(&group, &disk, with, (power, force, wait), events),
        Request::GroupOps { group } => {
            let ops = cairn_store::ops::list(&host.run_dir(), group.as_deref());
            Ok(Reply::Ops {
                group: group.map(|g| g.trim_start_matches('+').to_ascii_uppercase()),
                ops,
            })
        }
        Request::GroupSet { group, settings } => x.set(&group, &settings, events),
        Request::GroupGet { group, keys } => x.get(&group, &keys, events),
        Request::Ls { path } => x.ls(&path, events),
        Request::Du { path } => x.du(&path, events),
        Request::Mkdir { path, parents } => x.mkdir(&path, parents, events),
        Request::Rm { paths } => x.rm(&paths, events),
        Request::Mkalias { target, alias } => x.mkalias(&target, &alias, events),
        Request::CpIn {
            source,
            source_name,
            dest,
            template,
            redundancy,
            max_bytes,
        } => x.cp_in(
            input,
            (&source, source_name),
            &dest,
            (template, redundancy, max_bytes),
            events,
        ),
        Request::CpOut { source, dest } => x.cp_out(input, &source, &dest, events),
        Request::CpBetween {
            source,
            dest,
            template,
            redundancy,
        } => x.cp_between(&source, &dest, (template, redundancy), events),
        Request::Status => match host.service() {
            Some(s) => Ok(Reply::Status(Box::new(s.status()))),
            None => Err(no_service("status")),
        },
        Request::VolumeCreate {
            name,
            size_bytes,
            redundancy,
        } => x.volume_create(&name, size_bytes, redundancy.as_deref(), events),
        Request::VolumeAttach { name } => x.volume_attach(&name, events),
        Request::VolumeDetach { name } => x.volume_detach(&name, events),
        Request::VolumeResize { name, size_bytes } => x.volume_resize(&name, size_bytes, events),
        Request::VolumeList { group } => x.volume_list(group.as_deref(), events),
    }
}

/// Say which disks `g`'s metadata plane has taken offline after an I/O
/// error since the command began (for a command that failed).
pub fn say_taken_offline(g: &Opened, events: &mut dyn Events) {
    let since = g.offline_before;
    if let Ok(disks) = g.live.meta(|m| {
        m.disks_taken_offline()
            .get(since..)
            .unwrap_or_default()
            .to_vec()
    }) {
        if !disks.is_empty() {
            events.send(Event::TakenOffline {
                group: g.name.clone(),
                disks,
            });
        }
    }
}
