//! Real databases on the service: SQLite on the mount through a kill -9,
//! PostgreSQL on a volume through a disk failure, a rebalance and a kill -9.

use super::*;

/// SQLite on the mount, as a database runs there: one database in WAL mode
/// (its index shared through `MAP_SHARED` of the -shm file) and one with a
/// rollback journal (created, written, fsynced and deleted per
/// transaction), each taking thousands of transactions from several
/// connections at once; `PRAGMA integrity_check` is ok and every row is
/// there. Then the service is killed (`kill -9`) under a writer: the next
/// service cleans up the dead mount and replays the journal, and every
/// transaction SQLite reported committed is there.
#[test]
fn sqlite_runs_on_the_mount_and_keeps_every_commit_through_a_kill_9() {
    if !fuse_here() {
        return;
    }
    if std::process::Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_err()
    {
        prerequisite::missing("sqlite3 (scripts/install-deps installs it)");
        return;
    }
    const CONNECTIONS: usize = 4;
    const TRANSACTIONS: usize = 400;
    let rig = Rig::new();
    group(&rig);
    let serving = Service::start(&rig, &[]);
    std::fs::create_dir(serving.path("DATA/sq")).unwrap();
    for mode in ["wal", "delete"] {
        let db = serving.path(&format!("DATA/sq/{mode}.db"));
        assert_eq!(
            sqlite(
                &db,
                &format!(
                    "PRAGMA journal_mode={mode};\n\
                     CREATE TABLE t(id INTEGER PRIMARY KEY, conn INT, n INT, pad BLOB);\n\
                     CREATE INDEX t_conn ON t(conn, n);\n"
                )
            )
            .unwrap(),
            mode
        );
        let writers: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut script =
                        String::from(".bail on\n.timeout 60000\nPRAGMA synchronous=FULL;\n");
                    for n in 0..TRANSACTIONS {
                        script.push_str(&format!(
                            "BEGIN IMMEDIATE;\n\
                             INSERT INTO t(conn, n, pad) VALUES ({c}, {n}, randomblob({}));\n\
                             UPDATE t SET pad = randomblob(64) WHERE conn = {c} AND n = {};\n\
                             COMMIT;\n",
                            100 + (n * 37) % 900,
                            n / 2
                        ));
                    }
                    sqlite(&db, &script)
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap().unwrap();
        }
        let report = sqlite(
            &db,
            "PRAGMA integrity_check;\nSELECT count(*), count(DISTINCT conn), sum(n) FROM t;\n",
        )
        .unwrap();
        let per_conn: usize = (0..TRANSACTIONS).sum();
        assert_eq!(
            report,
            format!(
                "ok\n{}|{CONNECTIONS}|{}",
                CONNECTIONS * TRANSACTIONS,
                CONNECTIONS * per_conn
            ),
            "{mode}"
        );
    }

    // kill -9 under a writer that says each commit as it returns.
    let db = serving.path("DATA/sq/wal.db");
    sqlite(&db, "CREATE TABLE c(id INTEGER PRIMARY KEY);\n").unwrap();
    let mut script = String::from(".bail on\nPRAGMA synchronous=FULL;\n");
    for i in 1..=20_000 {
        script.push_str(&format!(
            "INSERT INTO c(id) VALUES ({i});\nSELECT 'committed {i}';\n"
        ));
    }
    let mut writer = std::process::Command::new("stdbuf")
        .args(["-oL", "sqlite3"])
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = writer.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        // Fails once the writer stops reading (it bails after the crash).
        let _ = std::io::Write::write_all(&mut input, script.as_bytes());
    });
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(writer.stdout.take().unwrap()));
    let mut committed: Vec<u64> = Vec::new();
    for line in lines.by_ref() {
        committed.push(
            line.unwrap()
                .trim_start_matches("committed ")
                .parse()
                .unwrap(),
        );
        if committed.len() == 500 {
            break;
        }
    }
    serving.kill_9();
    for line in lines {
        committed.push(
            line.unwrap()
                .trim_start_matches("committed ")
                .parse()
                .unwrap(),
        );
    }
    let status = writer.wait().unwrap();
    feeder.join().unwrap();
    assert!(
        !status.success() && committed.len() < 20_000,
        "the writer saw the service go ({} commits)",
        committed.len()
    );
    let mut serving = Service::start(&rig, &[]);
    serving.wait_for_log("cleaned up the dead mount");
    let db = serving.path("DATA/sq/wal.db");
    let present: std::collections::BTreeSet<u64> =
        sqlite(&db, "PRAGMA integrity_check;\nSELECT id FROM c;\n")
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.parse().unwrap())
            .collect();
    assert_eq!(
        sqlite(&db, "PRAGMA integrity_check;\n").unwrap(),
        "ok",
        "after the crash"
    );
    let lost: Vec<&u64> = committed.iter().filter(|i| !present.contains(i)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} commits lost after kill -9, first {:?}",
        lost.len(),
        committed.len(),
        &lost[..lost.len().min(5)]
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

/// PostgreSQL 15 on XFS on a volume of a normal-redundancy group over four
/// loop devices (sparse files) in two failure groups, with `initdb -k`
/// (data checksums), kept running through, in turn, under pgbench:
///
/// 1. a member disk's path lost (its loop device shrunk under the open
///    descriptor: reads come back empty, writes fail) — the service takes
///    it offline, no error reaches PostgreSQL, pgbench goes on;
/// 2. the path restored, `group online --wait` resyncing what it missed;
/// 3. `group alter` adding two disks and dropping two, its rebalance run
///    to the end;
/// 4. a `kill -9` of the service: the service restarted (`--attach-volumes`),
///    XFS mounted again and PostgreSQL's crash recovery run.
///
/// Then `pg_amcheck --heapallindexed` and, after a clean shutdown,
/// `pg_checksums -c` are clean, and `pgbench_history` holds every
/// transaction pgbench reported. pgbench runs are stopped by the
/// scenario (terminating their sessions, or the crash) once its events are
/// done, so no timing decides whether an event fell inside a run; a
/// transaction in flight at the stop may have committed unheard, so the
/// rows may exceed the reported count by at most one per client.
///
/// CI size: `pgbench -i -s 5` (the full run, `bench/pg-scenario.sh`, uses
/// 20: `CAIRN_PG_SCALE`), 8 clients (`CAIRN_PG_CLIENTS`), a clean run of
/// 5 s (`CAIRN_PG_SECONDS`).
#[test]
fn postgres_on_a_volume_keeps_every_transaction_through_a_disk_failure_a_rebalance_and_a_kill_9() {
    if !fuse_here() || !loop_here() {
        return;
    }
    if !Path::new(PG_BIN).join("pgbench").exists() {
        prerequisite::missing("PostgreSQL 15 (postgresql-15; scripts/install-deps installs it)");
        return;
    }
    let scale = env_or("CAIRN_PG_SCALE", 5);
    let clients = env_or("CAIRN_PG_CLIENTS", 8);
    let seconds = env_or("CAIRN_PG_SECONDS", 5);
    let started = std::time::Instant::now();
    let mut rig = Rig::new();
    // Six 2 GiB sparse files behind loop devices: D0, D1 (failure group
    // A), D2, D3 (B) make the group; the last two are added later.
    let mut loops = Vec::new();
    for i in 0..6 {
        match cairn_io::test_support::loop_device::LoopDevice::create(
            &rig.path(&format!("l{i}.img")),
            2 << 30,
            512,
        ) {
            Ok(l) => loops.push(l),
            Err(why) => {
                prerequisite::missing(&format!("loop devices: {why}"));
                return;
            }
        }
    }
    let path = |i: usize| loops[i].path.display().to_string();
    rig.discover = (0..6).map(path).collect::<Vec<_>>().join(",");
    let mut args: Vec<String> = ["group", "create", "DATA", "--redundancy", "normal"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for i in 0..4 {
        rig.cairn(&["disk", "label", &format!("D{i}"), &path(i)])
            .ok();
        args.push("--disk".into());
        args.push(format!("{}={}", path(i), if i < 2 { "A" } else { "B" }));
    }
    rig.cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
    let mut serving = Service::start(&rig, &[]);
    // Room for scale 20 and the WAL pgbench makes (max_wal_size is 1 GB).
    rig.cairn(&["volume", "create", "+DATA/vol/pg01", "--size", "2G"])
        .ok();
    let device = rig
        .cairn(&["volume", "attach", "+DATA/vol/pg01"])
        .ok()
        .stdout
        .trim()
        .to_string();
    // Outside the test's private directory, which `postgres` cannot enter.
    let mnt = std::env::temp_dir().join(format!("cairn-pg-{}", std::process::id()));
    std::fs::create_dir_all(&mnt).unwrap();
    let _volume = VolumeGuard {
        device: device.clone(),
        mount: mnt.clone(),
        owner: rig.path(""),
    };
    tool("mkfs.xfs", &["-q", "-f", &device]).unwrap();
    tool("mount", &[&device, mnt.to_str().unwrap()]).unwrap();
    tool("chown", &["postgres:postgres", mnt.to_str().unwrap()]).unwrap();
    let data = mnt.join("data").display().to_string();
    let sockets = mnt.display().to_string();
    let log = format!("{sockets}/server.log");
    as_postgres("initdb", &["-k", "-A", "trust", "-D", &data]).unwrap();
    let _server = Postgres { data: data.clone() };
    let pg_start = || {
        as_postgres(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-o",
                &format!("-k {sockets} -c listen_addresses=''"),
                "-l",
                &log,
                "-w",
                "-t",
                "300",
                "start",
            ],
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", std::fs::read_to_string(&log).unwrap_or_default()))
    };
    pg_start();
    let postmaster: u32 = std::fs::read_to_string(format!("{data}/postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap();
    psql(&sockets, "create extension amcheck");
    as_postgres(
        "pgbench",
        &[
            "-h",
            &sockets,
            "-i",
            "-s",
            &scale.to_string(),
            "-q",
            "postgres",
        ],
    )
    .unwrap();

    // 1. D1's path is lost under pgbench: the next I/O to it fails and the
    // service takes it offline, checked once a pgbench report (a bound on
    // a failure, not a synchronisation: every commit writes both copies).
    let mut bench = Pgbench::start(&sockets, clients, 3600);
    bench.progress(2);
    loops[1].set_size_limit(512).unwrap();
    let mut reports = 0;
    while disk_state(&rig, "D1") != "OFFLINE" {
        assert!(reports < 120, "D1 never went offline:\n{}", bench.seen);
        bench.progress(1);
        reports += 1;
    }
    bench.progress(3);
    // What an operator sees meanwhile: the volume's I/O, the disk out.
    let status = rig.cairn(&["status", "--json"]).ok().json();
    let volume = &status["volumes"][0];
    assert_eq!(volume["name"], "+DATA/vol/pg01", "{status}");
    assert_eq!(volume["device"], device.as_str(), "{status}");
    assert!(volume["writes"].as_u64().unwrap() > 0, "{status}");
    assert!(volume["flushes"].as_u64().unwrap() > 0, "{status}");
    let text = rig.cairn(&["status"]).ok().stdout;
    assert!(
        text.contains("+DATA/vol/pg01") && text.contains("OFFLINE"),
        "{text}"
    );

    // 2. The path comes back; online resyncs what D1 missed.
    loops[1].set_size_limit(0).unwrap();
    let back = rig
        .cairn(&["group", "online", "DATA", "D1", "--wait", "--json"])
        .ok()
        .json();
    assert!(back["resync"]["aus_copied"].as_u64().unwrap() > 0, "{back}");
    assert_eq!(disk_state(&rig, "D1"), "ONLINE");
    bench.progress(2);

    // 3. Two disks added, two dropped, in one operation. The change first
    // (the rebalance paused: what the status shows is then certain), then
    // the rebalance to its end, under pgbench.
    rig.cairn(&[
        "group",
        "alter",
        "DATA",
        "--add",
        &format!("{}=A", path(4)),
        "--add",
        &format!("{}=B", path(5)),
        "--drop",
        "D0",
        "--drop",
        "D2",
        "--power",
        "0",
    ])
    .ok();
    let status = rig.cairn(&["status", "--json"]).ok().json();
    assert!(
        status["groups"][0]["disks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["state"] == "DROPPING"),
        "{status}"
    );
    bench.progress(1);
    rig.cairn(&["group", "rebalance", "DATA", "--power", "8", "--wait"])
        .ok();
    assert_eq!(disk_state(&rig, "D0"), "GONE");
    assert_eq!(disk_state(&rig, "D2"), "GONE");
    bench.progress(2);
    // Stopped by terminating its sessions: every event is done.
    psql(
        &sockets,
        "select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name = 'pgbench'",
    );
    let (run1, processed1) = bench.finish();
    assert!(processed1 > 0, "{run1}");
    assert!(run1.contains("number of failed transactions: 0"), "{run1}");
    let rows1 = history_rows(&sockets);
    assert!(
        (processed1..=processed1 + u64::from(clients)).contains(&rows1),
        "{rows1} rows for {processed1} transactions reported:\n{run1}"
    );
    // No error reached PostgreSQL: its log names none but the sessions
    // the scenario terminated.
    let server_log = std::fs::read_to_string(&log).unwrap();
    let errors: Vec<&str> = server_log
        .lines()
        .filter(|l| {
            (l.contains("ERROR") || l.contains("PANIC") || l.contains("FATAL"))
                && !l.contains("terminating connection due to administrator command")
        })
        .collect();
    assert!(errors.is_empty(), "PostgreSQL saw errors: {errors:#?}");

    // A clean run: every transaction reported, exactly.
    let run2 = as_postgres(
        "pgbench",
        &[
            "-h",
            &sockets,
            "-n",
            "-c",
            &clients.to_string(),
            "-j",
            &clients.to_string(),
            "-T",
            &seconds.to_string(),
            "postgres",
        ],
    )
    .unwrap();
    let processed2 = pgbench_processed(&run2);
    assert!(run2.contains("number of failed transactions: 0"), "{run2}");
    assert_eq!(history_rows(&sockets), rows1 + processed2, "{run2}");
    let rows2 = rows1 + processed2;

    // 4. The service killed under pgbench: XFS, then PostgreSQL, see their
    // device fail; the service restarts and attaches the volume again,
    // XFS replays its log, PostgreSQL recovers. Every transaction
    // pgbench heard committed is there.
    let mut bench = Pgbench::start(&sockets, clients, 3600);
    bench.progress(2);
    serving.kill_9();
    let (run3, processed3) = bench.finish();
    let _ = as_postgres("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    // pg_ctl reads the PID file from the dead XFS, and may say it stopped
    // before the postmaster is gone; and a postmaster that is gone stays a
    // zombie (which PostgreSQL takes for a running one) until init reaps
    // it. Its PID is the condition waited on (a bound on a failure, not a
    // synchronisation).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while Path::new(&format!("/proc/{postmaster}")).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "postmaster {postmaster} still there"
        );
        let _ = as_postgres("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(umount(&mnt, 0), 0, "{}", std::io::Error::last_os_error());
    serving = Service::start(&rig, &["--attach-volumes"]);
    serving.wait_for_log("volume attached again");
    // The dead device was let go of (its file's attributes no longer
    // cached: the kernel cannot say which file it is bound to).
    assert!(
        serving
            .log()
            .contains("detached a volume's loop device the killed service left"),
        "{}",
        serving.log()
    );
    let listed = rig.cairn(&["volume", "list", "--json"]).ok().json();
    let device = listed[0]["device"].as_str().unwrap().to_string();
    let _again = VolumeGuard {
        device: device.clone(),
        mount: mnt.clone(),
        owner: rig.path(""),
    };
    tool("mount", &[&device, mnt.to_str().unwrap()]).unwrap();
    pg_start();
    let server_log = std::fs::read_to_string(&log).unwrap();
    assert!(
        server_log.contains("automatic recovery in progress")
            && server_log.contains("database system is ready to accept connections"),
        "{server_log}"
    );
    let rows3 = history_rows(&sockets);
    assert!(
        rows3 >= rows2 + processed3 && rows3 <= rows2 + processed3 + u64::from(clients),
        "{rows3} rows after the crash; {rows2} before the run, which reported {processed3}:\n{run3}"
    );

    // The whole database: heap and indexes agree, every page's checksum.
    let checked = as_postgres(
        "pg_amcheck",
        &[
            "-h",
            &sockets,
            "--heapallindexed",
            "--install-missing",
            "postgres",
        ],
    );
    assert!(checked.is_ok(), "{checked:?}");
    as_postgres("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"]).unwrap();
    let sums = as_postgres("pg_checksums", &["-c", "-D", &data]).unwrap();
    assert!(sums.contains("Bad checksums:  0"), "{sums}");
    assert_eq!(umount(&mnt, 0), 0);
    rig.cairn(&["volume", "detach", "+DATA/vol/pg01"]).ok();
    let _ = std::fs::remove_dir(&mnt);
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
    eprintln!(
        "postgres scenario: scale {scale}, {clients} clients: {processed1} transactions through a disk failure, its resync and alter --add 2 --drop 2 ({rows1} rows); {processed2} in a clean run ({seconds} s); {processed3} before the kill -9, {rows3} rows after recovery; errors seen by PostgreSQL: none; rows lost: none; {} s",
        started.elapsed().as_secs()
    );
}
