//! The live group's own rules: its data goes through handles, a dismount
//! waits for none, operations share a commit, a failed commit leader fails
//! its waiters instead of hanging them.

use super::*;

/// A live group's data goes through data handles: the group's own data
/// calls, which would run under the metadata lock and take latches after it
/// (a deadlock with a first writer holding a latch and waiting for the lock),
/// are refused.
#[test]
fn a_live_groups_own_data_calls_are_refused() {
    let (_shared, _ids, live) = live_group(5);
    let number = live
        .meta(|g| g.create_file(&path("x"), MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    let err = live
        .meta(|g| g.write(number, 0, &block(1, 4096)))
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, GroupError::Invalid(_)), "{err}");
    let err = live
        .meta(|g| g.initialize_file(number))
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, GroupError::Invalid(_)), "{err}");
    let mut back = vec![0u8; 4096];
    let err = live
        .meta(|g| g.read(number, 0, &mut back))
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, GroupError::Invalid(_)), "{err}");
    // Through a handle, all three work.
    let mut h = live.handle(8).unwrap();
    h.write(number, 0, &block(1, 4096)).unwrap();
    assert!(
        h.initialize_file(number).unwrap() == 0,
        "the only extent is written"
    );
    h.read(number, 0, &mut back).unwrap();
    assert_eq!(back, block(1, 4096));
}

/// A handle alive at dismount is a caller bug: refused, the group kept.
#[test]
fn dismount_with_a_live_handle_is_refused() {
    let (_shared, _ids, live) = live_group(4);
    let h = live.handle(8).unwrap();
    let again = live.clone();
    let err = live.dismount().unwrap_err();
    assert!(matches!(err, GroupError::Invalid(_)), "{err}");
    drop(h);
    again.dismount().unwrap();
}

/// Group commit: operations that queue up while another holds the metadata
/// plane run their steps in turn and share one journal record, and each
/// returns only once that record is durable. The first operation holds the
/// plane until the other two have begun (a handshake on the count of
/// operations begun), so the queue forms under every scheduling.
#[test]
fn operations_that_queue_up_share_one_commit() {
    let (_shared, _ids, live) = live_group(7);
    let records = |live: &LiveGroup| live.meta(|g| g.journal_records()).unwrap();
    let before = records(&live);
    let begun = live.operations_begun();
    let (go, queued) = std::sync::mpsc::channel::<()>();
    let queued = std::sync::Mutex::new(queued);
    std::thread::scope(|s| {
        for n in 0..2 {
            let live = live.clone();
            let queued = &queued;
            s.spawn(move || {
                queued.lock().unwrap().recv().unwrap();
                live.meta(|g| {
                    g.create_file(&path(&format!("q{n}")), MIB, &CreateOptions::default())
                })
                .unwrap()
                .unwrap();
            });
        }
        live.meta(|g| {
            // Only now, with the plane held, may the others begin.
            go.send(()).unwrap();
            go.send(()).unwrap();
            while live.operations_begun() < begun + 3 {
                std::thread::yield_now();
            }
            g.create_file(&path("q-first"), MIB, &CreateOptions::default())
                .unwrap();
        })
        .unwrap();
    });
    assert_eq!(
        records(&live) - before,
        1,
        "three creates that queued up were committed in one journal record"
    );
    // All three are named (the one record holds them all).
    let names = live
        .meta(|g| g.list(&GroupPath::parse("+LIVE").unwrap()))
        .unwrap()
        .unwrap();
    for name in ["q0", "q1", "q-first"] {
        assert!(names.iter().any(|e| e.name == name), "{name} listed");
    }
}

/// A panic in the commit leader hands the lead on: the operation that waited
/// for that commit is told the group stopped (`Poisoned`), it does not wait
/// for ever, and so is every operation after it. Whichever of the two
/// operations leads, the other waits for its commit.
#[test]
fn a_panic_in_the_commit_leader_fails_the_waiters_instead_of_hanging_them() {
    use cairn_store::group::{self, GroupSelector, MissingDisks, SameDevices};
    let (shared, ids, live) = live_group(11);
    live.dismount().unwrap();
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The metadata plane's engine panics at a flush once armed: a flush is
    // issued only by a commit (a step writes nothing below its dirty
    // limit), so the panic lands in whichever operation leads the commit.
    let arm = armed.clone();
    let (g, _) = group::mount_owned(
        Box::new(common::Hooked {
            inner: shared.handle(),
            hook: move |r: &cairn_io::Request| {
                if matches!(r.op, cairn_io::Op::Flush)
                    && arm.load(std::sync::atomic::Ordering::SeqCst)
                {
                    panic!("the commit leader panics");
                }
            },
            done: common::untouched,
        }),
        &ids,
        &GroupSelector::Name("LIVE".into()),
        MissingDisks::MarkOffline,
    )
    .unwrap();
    let source = shared.clone();
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            Box::new(source.handle()) as Box<dyn cairn_io::IoEngine>
        })),
    );
    let begun = live.operations_begun();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let (first, second) = std::thread::scope(|s| {
        let other = {
            let live = live.clone();
            s.spawn(move || {
                wait.recv().unwrap();
                live.meta(|g| g.create_file(&path("b"), MIB, &CreateOptions::default()))
            })
        };
        // The first operation holds the plane until the other has begun, so
        // both belong to the one commit that panics.
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            live.meta(|g| {
                go.send(()).unwrap();
                while live.operations_begun() < begun + 2 {
                    std::thread::yield_now();
                }
                armed.store(true, std::sync::atomic::Ordering::SeqCst);
                g.create_file(&path("a"), MIB, &CreateOptions::default())
            })
        }));
        let second = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            other
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }));
        (first, second)
    });
    // One of them led and panicked; the other returned Poisoned.
    let outcomes = [first.map(|r| r.map(|_| ())), second.map(|r| r.map(|_| ()))];
    let panicked = outcomes.iter().filter(|o| o.is_err()).count();
    let poisoned = outcomes
        .iter()
        .filter(|o| matches!(o, Ok(Err(GroupError::Poisoned(_)))))
        .count();
    assert_eq!(
        (panicked, poisoned),
        (1, 1),
        "one leader panicked, one waiter failed"
    );
    // And every later operation is refused at once.
    assert!(matches!(
        live.meta(|g| g.create_file(&path("c"), MIB, &CreateOptions::default())),
        Err(GroupError::Poisoned(_))
    ));
}
