//! Commands through the control socket: the CLI's same output, who may ask,
//! rebalance, scrub and reclaim run by the service beside readers and
//! writers, the metrics and status.

use super::*;

#[test]
fn the_cli_reaches_a_served_group_through_the_socket_with_the_same_output() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let data = random_file(&rig.path("data.bin"), 3 * MIB + 100, 21);
    rig.cairn(&["mkdir", "+DATA/orcl"]).ok();
    rig.cairn(&["cp", data.to_str().unwrap(), "+DATA/orcl/users01.dbf"])
        .ok();
    let before: Vec<Run> = SAME_THROUGH_THE_SOCKET
        .iter()
        .map(|args| rig.cairn(args))
        .collect();
    let missing = rig.cairn(&["rm", "+DATA/orcl/nothing.dbf"]);
    assert_eq!(missing.code, 1, "{missing:?}");

    let mut serving = Service::start(&rig, &[]);
    let socket = PathBuf::from(&rig.run_dir).join("cairn.sock");
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let meta = std::fs::metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    // The same output, text and JSON, and the same exit status: the
    // service carried each out (its log names every one).
    for (args, local) in SAME_THROUGH_THE_SOCKET.iter().zip(&before) {
        let served = rig.cairn(args);
        assert_eq!(
            (served.code, &served.stdout),
            (local.code, &local.stdout),
            "cairn {}: {served:?}",
            args.join(" ")
        );
        // The service logs each request by its command's name.
        let name = match args {
            ["group", sub, ..] => format!("group {sub}"),
            [first, ..] => first.to_string(),
            [] => String::new(),
        };
        serving.wait_for_log(&format!("cairn {name}: "));
    }
    // Another discovery string: carried out by the service only when it
    // reaches the very group the service holds.
    let elsewhere = rig.cairn(&["group", "disks", "DATA", "--discover", "/nonexistent/*.img"]);
    assert_eq!(elsewhere.code, 1, "{elsewhere:?}");
    assert!(
        elsewhere.stderr.contains("no disk group DATA"),
        "{elsewhere:?}"
    );
    let same = format!("{}/d*.img", rig.dir.path().display());
    let reached = rig
        .cairn(&["group", "disks", "DATA", "--discover", &same])
        .ok();
    assert_eq!(reached.stdout, before[6].stdout);
    let gone = rig.cairn(&["rm", "+DATA/orcl/nothing.dbf"]);
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.contains("does not exist"), "{gone:?}");
    // Changes through the socket are the file system's at once.
    rig.cairn(&["mkdir", "-p", "+DATA/arch/1"]).ok();
    assert!(serving.path("DATA/arch/1").is_dir());
    rig.cairn(&["mkalias", "+DATA/orcl/users01.dbf", "+DATA/users.dbf"])
        .ok();
    let through_alias = std::fs::read(serving.path("DATA/users.dbf")).unwrap();
    let want = std::fs::read(&data).unwrap();
    assert!(
        through_alias == want,
        "the alias reads {} bytes, the file has {}",
        through_alias.len(),
        want.len()
    );
    // A file removed by `cairn rm` while it is open stays readable through
    // its descriptor, as with an unlink through the mount.
    let mut open = std::fs::File::open(serving.path("DATA/orcl/users01.dbf")).unwrap();
    rig.cairn(&["rm", "+DATA/orcl/users01.dbf"]).ok();
    assert!(!rig
        .cairn(&["ls", "+DATA/"])
        .ok()
        .stdout
        .contains("users.dbf"));
    // The kernel was told: its cache of the name does not outlive it (an
    // open of the name now would otherwise find the removed file).
    assert!(!serving.path("DATA/orcl/users01.dbf").exists());
    let mut held = Vec::new();
    open.read_to_end(&mut held).unwrap();
    assert!(held == std::fs::read(&data).unwrap(), "read after rm");
    drop(open);

    // Bad requests get an error reply, and the service lives on.
    let replies = raw_request(&socket, b"{\"protocol\":2,\"discovery\":x}\n");
    assert!(
        replies.contains("\"status\":2") && replies.contains("at byte 27"),
        "{replies}"
    );
    let replies = raw_request(&socket, &vec![b'{'; 70_000]);
    assert!(replies.contains("longer than 65536 bytes"), "{replies}");
    let replies = raw_request(
        &socket,
        b"{\"protocol\":9,\"discovery\":\"\",\"request\":{\"command\":\"status\"}}\n",
    );
    assert!(replies.contains("protocol 9"), "{replies}");
    // The command line of protocol 1 is not taken, however it is put.
    let replies = raw_request(
        &socket,
        b"{\"protocol\":1,\"argv\":[\"group\",\"disks\",\"DATA\"],\"discovery\":\"\"}\n",
    );
    assert!(replies.contains("protocol 1"), "{replies}");
    let replies = raw_request(
        &socket,
        b"{\"protocol\":2,\"discovery\":\"\",\"request\":{\"command\":\"group_disks\",\"group\":\"DATA\"},\"argv\":[\"group\",\"disks\",\"DATA\"]}\n",
    );
    assert!(replies.contains("unknown field `argv`"), "{replies}");
    let replies = raw_request(
        &socket,
        b"{\"protocol\":2,\"discovery\":\"\",\"request\":{\"command\":\"group_disks\",\"group\":\"NOSUCH\"}}\n",
    );
    assert_eq!(replies.trim(), "\"not_held\"");
    assert_eq!(rig.cairn(&["group", "disks", "DATA"]).ok().code, 0);

    // Only root, the service's user and its --socket-group: another user
    // who reaches the socket is refused by its credentials.
    for dir in [rig.dir.path(), Path::new(&rig.run_dir)] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    use std::os::unix::process::CommandExt;
    let nobody = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", rig.run_dir.as_str())])
        .args(["group", "disks", "DATA"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let nobody = Run::from(nobody);
    assert_eq!(nobody.code, 1, "{nobody:?}");
    assert!(
        nobody.stderr.contains("user 65534 may not use"),
        "{nobody:?}"
    );

    // A second service on the same socket is refused, naming the first.
    let pid = serving.pid();
    let other = rig.path("other");
    std::fs::create_dir_all(&other).unwrap();
    let second = rig.cairn(&["serve", "--mountpoint", other.to_str().unwrap()]);
    assert_eq!(second.code, 1, "{second:?}");
    assert!(
        second.stderr.contains(&format!("process {pid}")),
        "{second:?}"
    );
    // `cp` in through the socket: the CLI hands over the file it opened
    // (or its standard input); the name appears with every byte, and the
    // file's length in bytes, readable through the mount at once.
    let odd = random_file(&rig.path("odd.bin"), MIB + 777, 22);
    rig.cairn(&["cp", odd.to_str().unwrap(), "+DATA/arch/"])
        .ok();
    serving.wait_for_log("cairn cp");
    assert!(
        std::fs::read(serving.path("DATA/arch/odd.bin")).unwrap() == std::fs::read(&odd).unwrap()
    );
    let piped = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", rig.run_dir.as_str())])
        .args(["cp", "-", "+DATA/arch/piped.dat", "--max-size", "100000"])
        .stdin(std::fs::File::open(&odd).unwrap())
        .output()
        .unwrap();
    let piped = Run::from(piped).ok();
    assert!(piped.stderr.contains("stopped at --max-size"), "{piped:?}");
    assert!(
        std::fs::read(serving.path("DATA/arch/piped.dat")).unwrap()[..]
            == std::fs::read(&odd).unwrap()[..100_000]
    );
    let taken = rig.cairn(&["cp", odd.to_str().unwrap(), "+DATA/arch/odd.bin"]);
    assert_eq!(taken.code, 1, "{taken:?}");
    assert!(taken.stderr.contains("exists"), "{taken:?}");
    // `cp` out: the service says where its file system serves the file;
    // the CLI reads it there and writes the destination as it always does.
    let out = rig.path("out.bin");
    rig.cairn(&["cp", "+DATA/arch/odd.bin", out.to_str().unwrap()])
        .ok();
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&odd).unwrap());
    let absent = rig.cairn(&[
        "cp",
        "+DATA/arch/none.bin",
        rig.path("none").to_str().unwrap(),
    ]);
    assert_eq!(absent.code, 1, "{absent:?}");
    assert!(!rig.path("none").exists());
    // Between groups: read through the mount, copied in by the service.
    rig.cairn(&["cp", "+DATA/arch/odd.bin", "+DATA/arch/copy.bin"])
        .ok();
    assert!(
        std::fs::read(serving.path("DATA/arch/copy.bin")).unwrap() == std::fs::read(&odd).unwrap()
    );

    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!socket.exists(), "the socket goes with the service");
    rig.check_clean("DATA");
}

/// Issue 34 items 6 and 7: through the socket a member of its group is
/// checked by its own credentials, as the mount checks it — a root-owned
/// 0755 directory and 0644 file it may only read, a 0600 file it may not
/// alias — and it gives no administrative command; a user the socket's
/// mode keeps out is told "permission denied", not that no service
/// answers.
#[test]
fn a_socket_group_member_is_checked_as_the_mount_checks_it() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    // Other users may pass through to the socket and the sources, no more.
    for dir in [rig.dir.path(), Path::new(&rig.run_dir)] {
        mode(dir, 0o711);
    }
    let serving = Service::start(&rig, &["--socket-group", "nogroup"]);
    let socket = PathBuf::from(&rig.run_dir).join("cairn.sock");
    std::fs::create_dir(serving.path("DATA/root")).unwrap();
    mode(&serving.path("DATA/root"), 0o755);
    std::fs::write(serving.path("DATA/root/kept.dbf"), b"root's").unwrap();
    mode(&serving.path("DATA/root/kept.dbf"), 0o644);
    std::fs::write(serving.path("DATA/root/secret.dbf"), b"root only").unwrap();
    mode(&serving.path("DATA/root/secret.dbf"), 0o600);
    std::fs::create_dir(serving.path("DATA/shared")).unwrap();
    mode(&serving.path("DATA/shared"), 0o777);
    let source = rig.path("src.bin");
    std::fs::write(&source, b"nobody's bytes").unwrap();
    mode(&source, 0o644);
    let as_user = |uid: u32, gid: u32, args: &[&str]| {
        use std::os::unix::process::CommandExt;
        let out = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", rig.run_dir.as_str())])
            .args(args)
            .uid(uid)
            .gid(gid)
            .output()
            .unwrap();
        Run::from(out)
    };
    let member = |args: &[&str]| as_user(65534, 65534, args);
    let refused = |run: Run, what: &str| {
        assert_eq!(run.code, 1, "{what}: {run:?}");
        assert!(run.stderr.contains("permission denied"), "{what}: {run:?}");
        assert_eq!(run.stderr.lines().count(), 1, "{what}: {run:?}");
    };
    // What the member may do: list, read, and change a directory it may
    // write.
    let listed = member(&["ls", "+DATA/root"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.stdout.contains("kept.dbf"), "{listed:?}");
    assert_eq!(member(&["mkdir", "+DATA/shared/mine"]).code, 0);
    let copied = member(&["cp", source.to_str().unwrap(), "+DATA/shared/mine/"]);
    assert_eq!(copied.code, 0, "{copied:?}");
    assert_eq!(
        std::fs::read(serving.path("DATA/shared/mine/src.bin")).unwrap(),
        b"nobody's bytes"
    );
    assert_eq!(member(&["rm", "+DATA/shared/mine/src.bin"]).code, 0);
    // What the mount would refuse it, the socket refuses.
    refused(
        member(&["rm", "+DATA/root/kept.dbf"]),
        "rm in a 0755 root directory",
    );
    refused(
        member(&["cp", source.to_str().unwrap(), "+DATA/root/"]),
        "cp into a 0755 root directory",
    );
    refused(
        member(&["mkdir", "+DATA/root/sub"]),
        "mkdir in a 0755 root directory",
    );
    refused(
        member(&["mkalias", "+DATA/root/secret.dbf", "+DATA/shared/alias"]),
        "mkalias of a 0600 file it does not own",
    );
    refused(
        member(&[
            "cp",
            "+DATA/root/secret.dbf",
            rig.path("out.bin").to_str().unwrap(),
        ]),
        "cp out of a 0600 file",
    );
    // Administrative commands need root, the service's user or
    // --admin-group.
    refused(member(&["group", "offline", "DATA", "D3"]), "group offline");
    refused(
        member(&["group", "set", "DATA", "disk_repair_time=1h"]),
        "group set",
    );
    refused(member(&["group", "scrub", "DATA"]), "group scrub");
    assert_eq!(
        std::fs::read(serving.path("DATA/root/kept.dbf")).unwrap(),
        b"root's"
    );
    assert!(!serving.path("DATA/root/sub").exists());
    assert!(!serving.path("DATA/root/src.bin").exists());
    assert!(!serving.path("DATA/shared/alias").exists());
    assert!(!rig.path("out.bin").exists());
    assert_eq!(disk_state(&rig, "D3"), "ONLINE");
    // A user outside the socket's group cannot open it (mode 0660).
    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    let outsider = as_user(4242, 4242, &["ls", "+DATA"]);
    refused(outsider, "a user the socket's mode keeps out");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn serve_leaves_a_paused_rebalance_paused_and_resumes_it_when_told() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let data = random_file(&rig.path("data.bin"), 24 * MIB, 31);
    rig.cairn(&["cp", data.to_str().unwrap(), "+DATA/big.dbf"])
        .ok();
    // A disk joins with the rebalance left paused: the group has moves
    // pending.
    let new = sparse(&rig.path("d4.img"), 256 * MIB);
    rig.cairn(&["disk", "label", "D4", new.to_str().unwrap()])
        .ok();
    rig.cairn(&[
        "group",
        "alter",
        "DATA",
        "--add",
        &format!("{}=B", new.display()),
        "--power",
        "0",
    ])
    .ok();
    let used = |rig: &Rig| -> u64 {
        let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
        disks
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["label"] == "D4")
            .map(|d| d["total_aus"].as_u64().unwrap() - d["free_aus"].as_u64().unwrap())
            .unwrap()
    };
    assert_eq!(used(&rig), 0, "nothing moved yet");
    // Paused (power 0) is a decision: the service says so, and leaves it.
    let mut serving = Service::start(&rig, &[]);
    serving.wait_for_log("a rebalance is pending, paused");
    assert_eq!(used(&rig), 0, "still paused");
    // Resumed through the socket at a power, it fills the new disk.
    rig.cairn(&["group", "rebalance", "DATA", "--power", "4", "--wait"])
        .ok();
    assert!(used(&rig) > 0, "the rebalance moved data onto D4");
    assert!(std::fs::read(serving.path("DATA/big.dbf")).unwrap() == std::fs::read(&data).unwrap());
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

#[test]
fn a_served_group_scrubs_clean_under_writes_and_repairs_a_rotten_copy() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let src = random_file(&rig.path("src.bin"), 8 * MIB, 41);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/still.dbf"])
        .ok();
    let serving = Service::start(&rig, &[]);
    // A writer through the mount (O_DIRECT, 64 KiB blocks, each pass a new
    // pattern) while the scrubs run: none of its writes may look like a
    // disagreement, nor be undone by a repair.
    let busy = serving.path("DATA/busy.dbf");
    std::fs::write(&busy, vec![0u8; 4 * MIB as usize]).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (busy, stop) = (busy.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::os::unix::fs::{FileExt, OpenOptionsExt};
            let f = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(&busy)
                .unwrap();
            let mut block = cairn_io::AlignedBuf::zeroed(64 << 10);
            let mut model = vec![0u8; 64];
            let mut pass = 0u8;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                pass = pass.wrapping_add(1).max(1);
                for (i, m) in model.iter_mut().enumerate() {
                    block.fill(pass);
                    f.write_all_at(&block, i as u64 * (64 << 10)).unwrap();
                    *m = pass;
                }
            }
            model
        })
    };
    for args in [
        &["group", "scrub", "DATA", "--wait", "--json"][..],
        &["group", "scrub", "DATA", "--wait", "--repair", "--json"][..],
    ] {
        let run = rig.cairn(args).ok().json();
        assert_eq!(run["scrub"]["problems"], serde_json::json!([]), "{run:#}");
        assert_eq!(run["scrub"]["bytes_rewritten"], 0, "{run:#}");
        assert!(
            run["scrub"]["bytes_read"].as_u64().unwrap() >= 2 * 8 * MIB,
            "{run:#}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let model = writer.join().unwrap();
    let now = std::fs::read(&busy).unwrap();
    for (i, m) in model.iter().enumerate() {
        let at = i * (64 << 10);
        assert!(
            now[at..at + (64 << 10)].iter().all(|b| b == m),
            "block {i} holds what was last written"
        );
    }

    // One copy of a block of still.dbf rots on its disk.
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let at = 2 * MIB as usize + 4096;
    let source = std::fs::read(&src).unwrap();
    let block = &source[at..at + 4096];
    let mut hits: Vec<(usize, u64)> = Vec::new();
    for i in 0..4 {
        let bytes = std::fs::read(rig.path(&format!("d{i}.img"))).unwrap();
        for (k, b) in bytes.chunks(4096).enumerate() {
            if b == block {
                hits.push((i, k as u64 * 4096));
            }
        }
    }
    assert_eq!(hits.len(), 2, "two copies of the block: {hits:?}");
    assert_ne!(
        hits[0].0 / 2,
        hits[1].0 / 2,
        "copies in failure groups A and B"
    );
    let (hit, good_copy) = (hits[1], hits[0]);
    let device = std::fs::OpenOptions::new()
        .write(true)
        .open(rig.path(&format!("d{}.img", hit.0)))
        .unwrap();
    device.write_all_at(&[0x5A; 4096], hit.1).unwrap();
    device.sync_all().unwrap();
    // A copy as it lies on its device, around the page cache.
    let raw = |(i, offset): (usize, u64)| {
        let device = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(rig.path(&format!("d{i}.img")))
            .unwrap();
        let mut buf = cairn_io::AlignedBuf::zeroed(4096);
        device.read_exact_at(&mut buf, offset).unwrap();
        buf.to_vec()
    };
    // Which disks hold the two copies: the one the test rotted, and the
    // good one (known from the source file, not from what scrub says).
    let rows = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let label_of = |i: usize| {
        let path = rig.path(&format!("d{i}.img"));
        rows.as_array()
            .unwrap()
            .iter()
            .find(|d| d["path"].as_str() == Some(path.to_str().unwrap()))
            .unwrap_or_else(|| panic!("{} in {rows:#}", path.display()))["label"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (rotten, good) = (label_of(hit.0), label_of(good_copy.0));
    let found = rig.cairn(&["group", "scrub", "DATA", "--wait", "--json"]);
    assert_eq!(found.code, 1, "{found:?}");
    let range = format!("bytes {at}..{}", at + 4096);
    // Two copies that differ: both are named (nothing says which is
    // damaged).
    let named = [
        format!("{range} (4 KiB) copies on {rotten}, {good}"),
        format!("{range} (4 KiB) copies on {good}, {rotten}"),
    ];
    assert!(
        named.iter().any(|n| found.stdout.contains(n)) && found.stdout.contains("still.dbf"),
        "both copies are named ({named:?}): {found:?}"
    );
    // Two copies that differ: a repair does not guess between them.
    let unsure = rig.cairn(&["group", "scrub", "DATA", "--wait", "--repair", "--json"]);
    assert_eq!(unsure.code, 1, "{unsure:?}");
    assert_eq!(unsure.json()["scrub"]["bytes_rewritten"], 0, "{unsure:?}");
    assert_eq!(
        raw(hit),
        vec![0x5A; 4096],
        "nothing rewritten without a choice"
    );
    assert_eq!(raw(good_copy), block, "nothing rewritten without a choice");
    let repaired = rig
        .cairn(&[
            "group", "scrub", "DATA", "--wait", "--repair", "--prefer", &good, "--json",
        ])
        .ok()
        .json();
    assert_eq!(repaired["scrub"]["bytes_rewritten"], 4096, "{repaired:#}");
    let again = rig
        .cairn(&["group", "scrub", "DATA", "--wait", "--json"])
        .ok()
        .json();
    assert_eq!(
        again["scrub"]["problems"],
        serde_json::json!([]),
        "{again:#}"
    );
    // The repair wrote the preferred copy's bytes over the damaged one and
    // left the preferred one alone: on the devices, both are the block.
    assert_eq!(raw(hit), block, "the repaired copy holds the block");
    assert_eq!(raw(good_copy), block, "the preferred copy is untouched");
    // The repaired copy alone serves the file: the good copy's disk goes
    // offline, and the file reads through the mount as the source.
    rig.cairn(&["group", "offline", "DATA", &good]).ok();
    let read = std::fs::read(serving.path("DATA/still.dbf")).unwrap();
    assert!(read == source, "the repaired copy reads as the source");
    rig.cairn(&["group", "online", "DATA", &good, "--wait"])
        .ok();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

#[test]
fn metrics_and_status_count_what_the_file_system_served() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let none = rig.cairn(&["status"]);
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.contains("no Cairn service answers"), "{none:?}");
    let mut serving = Service::start(&rig, &["--metrics", "127.0.0.1:0"]);
    let addr = serving.metrics_addr();
    // I/O through the mount: 3 writes of 64 KiB, an fsync, a read.
    {
        use std::io::Write;
        let mut f = std::fs::File::create(serving.path("DATA/m.dbf")).unwrap();
        for _ in 0..3 {
            f.write_all(&[7u8; 64 << 10]).unwrap();
        }
        f.sync_all().unwrap();
    }
    assert_eq!(
        std::fs::read(serving.path("DATA/m.dbf")).unwrap().len(),
        3 << 16
    );
    let (status, body) = http_get(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(status.contains("200"), "{status}");
    let value = |name: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("{name} in {body}"))
    };
    assert!(value("cairn_fs_requests_total{group=\"DATA\",op=\"write\"}") >= 1.0);
    assert!(value("cairn_fs_bytes_total{group=\"DATA\",op=\"write\"}") >= f64::from(3 << 16));
    assert!(value("cairn_fs_requests_total{group=\"DATA\",op=\"fsync\"}") >= 1.0);
    assert!(value("cairn_fs_bytes_total{group=\"DATA\",op=\"read\"}") >= f64::from(3 << 16));
    assert_eq!(
        value("cairn_fs_errors_total{group=\"DATA\",op=\"write\"}"),
        0.0
    );
    let writes = value("cairn_fs_requests_total{group=\"DATA\",op=\"write\"}");
    assert_eq!(
        value("cairn_fs_latency_seconds_bucket{group=\"DATA\",op=\"write\",le=\"+Inf\"}"),
        writes
    );
    for d in 0..4 {
        assert!(
            body.contains(&format!("cairn_disk_state{{group=\"DATA\",disk=\"D{d}\"")),
            "{body}"
        );
    }
    // Per disk, the data plane's I/O: normal redundancy writes each byte on
    // two disks (one per failure group), so the disks' writes hold at least
    // twice the file's bytes; every disk was flushed by the fsync that had
    // something on it; the reads the file system served (above) came
    // from the disks.
    let disk_total = |what: &str, op: &str| -> f64 {
        (0..4)
            .map(|d| {
                value(&format!(
                    "cairn_disk_io_{what}_total{{group=\"DATA\",disk=\"D{d}\",op=\"{op}\"}}"
                ))
            })
            .sum()
    };
    assert!(
        disk_total("bytes", "write") >= f64::from(2 * (3 << 16)),
        "{body}"
    );
    assert!(disk_total("requests", "flush") >= 2.0, "{body}");
    assert!(disk_total("bytes", "read") >= f64::from(3 << 16), "{body}");
    assert_eq!(disk_total("errors", "write"), 0.0, "{body}");
    // Anything else: an answer, and the endpoint lives on.
    assert!(http_get(&addr, "GET /x HTTP/1.1\r\n\r\n").0.contains("404"));
    assert!(http_get(&addr, "\u{1}\u{2}garbage\r\n\r\n")
        .0
        .contains("400"));
    // `cairn status`: the same figures through the socket.
    let s = rig.cairn(&["status", "--json"]).ok().json();
    let g = &s["groups"][0];
    assert_eq!(g["name"], "DATA");
    assert!(g["writes"]["bytes"].as_u64().unwrap() >= 3 << 16, "{s:#}");
    assert_eq!(g["disks"].as_array().unwrap().len(), 4, "{s:#}");
    let written: u64 = g["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["io"]["writes"]["bytes"].as_u64().unwrap())
        .sum();
    assert!(written >= 2 * (3 << 16), "{s:#}");
    let text = rig.cairn(&["status"]).ok();
    assert!(text.stdout.contains("group DATA (NORMAL)"), "{text:?}");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn a_served_reclaim_runs_beside_readers_refuses_a_second_operation_and_resumes_after_a_stop() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    rig.cairn(&["group", "set", "DATA", "thin_provisioned=false"])
        .ok();
    let keep = random_file(&rig.path("keep.bin"), 8 * MIB, 5);
    rig.cairn(&["cp", keep.to_str().unwrap(), "+DATA/keep.dbf"])
        .ok();
    let big = random_file(&rig.path("big.bin"), 64 * MIB, 6);
    rig.cairn(&["cp", big.to_str().unwrap(), "+DATA/big.dbf"])
        .ok();
    rig.cairn(&["rm", "+DATA/big.dbf"]).ok();
    let disks: Vec<PathBuf> = (0..4).map(|i| rig.path(&format!("d{i}.img"))).collect();
    let held = || disks.iter().map(|d| allocated(d)).sum::<u64>();
    let held_before = held();

    let serving = Service::start(&rig, &[]);
    let returnable = returnable_total(&rig);
    assert!(returnable >= 2 * 64 * MIB, "{returnable}");
    // At 1 MB/s a disk, each batch (one AU a request, paced) is paid for
    // over seconds: the reclaim runs until it is stopped.
    let started = rig.cairn(&["group", "reclaim", "DATA", "--rate", "1"]).ok();
    assert!(
        started.stdout.contains("reclaim started in the background"),
        "{}",
        started.stdout
    );
    rig.cairn(&["group", "reclaim", "DATA"])
        .refused("a reclaim is running on group DATA already");
    rig.cairn(&["group", "scrub", "DATA"])
        .refused("a reclaim is running on group DATA already");
    // Its first batch lands (a bound on a failure, not a synchronisation:
    // the space report is).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while returnable_total(&rig) == returnable {
        assert!(
            std::time::Instant::now() < deadline,
            "no batch in 2 minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The data in use reads back whole beside it.
    assert!(std::fs::read(serving.path("DATA/keep.dbf")).unwrap() == std::fs::read(&keep).unwrap());
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("the reclaim stopped because the service is stopping"),
        "{log}"
    );
    let left = returnable_total(&rig);
    assert!(left > 0 && left < returnable, "{left} of {returnable} left");

    // Served again, the reclaim goes on from where it stopped, and ends.
    let serving = Service::start(&rig, &[]);
    let done = rig
        .cairn(&[
            "group", "reclaim", "DATA", "--rate", "0", "--wait", "--json",
        ])
        .ok()
        .json();
    assert_eq!(done["reclaim"]["returnable_bytes"].as_u64().unwrap(), left);
    assert_eq!(done["reclaim"]["returned_bytes"].as_u64().unwrap(), left);
    assert_eq!(returnable_total(&rig), 0);
    let again = rig.cairn(&["group", "reclaim", "DATA", "--wait"]).ok();
    assert!(
        again.stdout.starts_with("nothing to reclaim in DATA"),
        "{}",
        again.stdout
    );
    assert!(
        held() + 2 * 64 * MIB <= held_before + MIB,
        "the dropped file's copies are given back: {} -> {} MiB",
        held_before >> 20,
        held() >> 20
    );
    assert!(std::fs::read(serving.path("DATA/keep.dbf")).unwrap() == std::fs::read(&keep).unwrap());
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}
