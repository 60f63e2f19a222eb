//! Which host this is, for the heartbeats that keep two hosts from writing
//! one group (`group::heartbeat`).
//!
//! The id must be stable across restarts (a host that crashed and comes
//! back must know its own heartbeat, or it would have to take its own group
//! over) and distinct between hosts that share disks (two hosts with one id
//! would each take the other's heartbeat for their own). In order:
//!
//! 1. `/etc/machine-id` (systemd's, 128 bits, made at install);
//! 2. `/etc/hostid` (the 32-bit id ZFS's multihost protection uses);
//! 3. `/var/lib/cairn/host-id`, a random id made on first use and kept.
//!
//! A cloned VM image that keeps its machine-id gives two hosts one id;
//! `systemd-machine-id-setup` after cloning is the cure (the same holds for
//! ZFS's hostid).
//!
//! Test-only switches (documented in `docs/multihost.md`; never for
//! production, where they would defeat the protection): `CAIRN_TEST_HOST`
//! makes this process the host of that name, with an id derived from the
//! name, so that one machine can play two hosts on the same disks.

use std::path::Path;

use uuid::Uuid;

use crate::group::heartbeat::HostIdentity;

/// The test-only switch naming the host this process plays.
pub const TEST_HOST_ENV: &str = "CAIRN_TEST_HOST";

const MACHINE_ID: &str = "/etc/machine-id";
const HOSTID: &str = "/etc/hostid";
const KEPT_ID_DIR: &str = "/var/lib/cairn";

/// This host, as its heartbeats name it.
pub fn this_host() -> Result<HostIdentity, String> {
    let pid = std::process::id();
    if let Some(name) = std::env::var_os(TEST_HOST_ENV) {
        let name = name.to_string_lossy().into_owned();
        return Ok(HostIdentity::new(id_from_name(&name), &name, pid));
    }
    let id = machine_id(Path::new(MACHINE_ID))
        .or_else(|| hostid(Path::new(HOSTID)))
        .map(Ok)
        .unwrap_or_else(|| kept_id(Path::new(KEPT_ID_DIR)))?;
    Ok(HostIdentity::new(id, &host_name(), pid))
}

/// A stable, non-nil id from a name (FNV-1a, 64 bits twice).
fn id_from_name(name: &str) -> Uuid {
    let fnv = |seed: u64| {
        name.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let high = fnv(0xcbf2_9ce4_8422_2325);
    let low = fnv(high ^ 0x5bd1_e995);
    Uuid::from_u64_pair(high, low | 1)
}

fn machine_id(path: &Path) -> Option<Uuid> {
    let text = std::fs::read_to_string(path).ok()?;
    Uuid::try_parse(text.trim()).ok().filter(|u| !u.is_nil())
}

fn hostid(path: &Path) -> Option<Uuid> {
    let bytes = std::fs::read(path).ok()?;
    let id = u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?);
    // Marked apart from a machine-id that happened to be this small.
    (id != 0).then(|| Uuid::from_u64_pair(0x686f_7374_6964_0000, u64::from(id)))
}

fn kept_id(dir: &Path) -> Result<Uuid, String> {
    let path = dir.join("host-id");
    if let Some(id) = machine_id(&path) {
        return Ok(id);
    }
    let fail = |e: std::io::Error| {
        format!(
            "this host has no id to tell it from other hosts that share disks ({MACHINE_ID} and {HOSTID} are missing, and {} cannot be written: {e}); run `systemd-machine-id-setup` as root",
            path.display()
        )
    };
    std::fs::create_dir_all(dir).map_err(fail)?;
    // Made whole beside, then linked in: two processes making one at once
    // keep whichever linked first.
    let fresh = Uuid::new_v4();
    let temporary = dir.join(format!("host-id.{}", std::process::id()));
    std::fs::write(&temporary, format!("{}\n", fresh.simple())).map_err(fail)?;
    let linked = std::fs::hard_link(&temporary, &path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => Ok(fresh),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            machine_id(&path).ok_or_else(|| fail(e))
        }
        Err(e) => Err(fail(e)),
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_machine_id_then_hostid_then_a_kept_one() {
        let dir = tempfile::tempdir().unwrap();
        let machine = dir.path().join("machine-id");
        std::fs::write(&machine, "3d1219c7c4c5404aaa1f6d2a48adfda4\n").unwrap();
        assert_eq!(
            machine_id(&machine),
            Some(Uuid::from_u128(0x3d1219c7_c4c5_404a_aa1f_6d2a48adfda4))
        );
        std::fs::write(&machine, "\n").unwrap();
        assert_eq!(machine_id(&machine), None, "an empty machine-id is none");

        let host = dir.path().join("hostid");
        std::fs::write(&host, 0x1234_5678u32.to_ne_bytes()).unwrap();
        let id = hostid(&host).unwrap();
        assert_eq!(id.as_u64_pair().1, 0x1234_5678);
        std::fs::write(&host, [0u8; 4]).unwrap();
        assert_eq!(hostid(&host), None);

        let kept = dir.path().join("state");
        let first = kept_id(&kept).unwrap();
        assert_eq!(kept_id(&kept).unwrap(), first, "the kept id is kept");
    }

    #[test]
    fn test_hosts_are_told_apart_by_name() {
        assert_ne!(id_from_name("hostA"), id_from_name("hostB"));
        assert_eq!(id_from_name("hostA"), id_from_name("hostA"));
        assert!(!id_from_name("").is_nil());
    }
}
