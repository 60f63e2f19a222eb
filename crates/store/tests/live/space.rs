//! Freed space and older readers: creates never short of space while a
//! reader holds freed runs, first writes into lent space waiting for the
//! older reader or the discard in flight.

use super::*;

/// The second sighting of issue 35's "no space" (`metadata_churn_never_
/// disturbs_data_threads` under load): files created and removed while
/// an older data operation runs. What each removal frees waits for that
/// operation (it may still read it); before, a create then found no space
/// although at most one churned file existed at a time, all the rest held
/// back for a reader that reads none of it. The space is lent instead.
#[test]
fn creates_never_find_no_space_while_an_older_reader_holds_freed_space() {
    let (_shared, live, _held) = nearly_full_group(31, 2);
    let steady = live
        .meta(|g| g.create_file(&path("steady"), MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    live.handle(8)
        .unwrap()
        .write(steady, 0, &block(5, MIB as usize))
        .unwrap();
    let reader = HeldReader::start(&live, steady, false);
    for n in 0..6 {
        let p = path(&format!("churn{}", n % 2));
        let made = live
            .meta(|g| g.create_file(&p, MIB, &CreateOptions::default()))
            .unwrap();
        assert!(
            made.is_ok(),
            "create {n} while a reader holds the freed space: {made:?}"
        );
        live.meta(|g| g.remove(&p)).unwrap().unwrap();
    }
    assert!(
        reader.finish() == block(5, 64 * 1024),
        "the reader read its file's bytes"
    );
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// Space lent while an older reader may still read it: the new file's
/// first write waits until that reader is over, so the reader still reads
/// the bytes of the file it started on, never the new file's.
#[test]
fn a_first_write_into_lent_space_waits_for_the_older_reader() {
    let (_shared, live, _held) = nearly_full_group(32, 1);
    let old = live
        .meta(|g| g.create_file(&path("old"), MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap()
        .number;
    live.handle(8)
        .unwrap()
        .write(old, 0, &block(1, MIB as usize))
        .unwrap();
    let copies = |number: u32| {
        let mut c: Vec<(u16, u32)> = live
            .plane()
            .file(number)
            .unwrap()
            .extent(0)
            .unwrap()
            .copies()
            .iter()
            .map(|c| (c.disk, c.au))
            .collect();
        c.sort_unstable();
        c
    };
    let old_copies = copies(old);
    // The reader rejects the primary copy, and reads the other after the
    // release: by then the old file's AUs are the new file's.
    let reader = HeldReader::start(&live, old, true);
    live.meta(|g| g.remove(&path("old"))).unwrap().unwrap();
    let new = live
        .meta(|g| g.create_file(&path("new"), MIB, &CreateOptions::default()))
        .unwrap()
        .expect("the old file's space, lent")
        .number;
    assert_eq!(
        copies(new),
        old_copies,
        "the new file has the old one's AUs"
    );
    let writer = {
        let live = live.clone();
        std::thread::spawn(move || {
            live.handle(8)
                .unwrap()
                .write(new, 0, &block(2, MIB as usize))
        })
    };
    wait_for(
        || live.plane().lent_waits() > 0,
        "the first write waits for the lent space",
    );
    let read = reader.finish();
    assert!(
        read == block(1, 64 * 1024),
        "the older reader read the old file's bytes, not {}",
        if read == block(2, 64 * 1024) {
            "the new file's"
        } else {
            "these"
        }
    );
    writer.join().unwrap().unwrap();
    let mut back = vec![0u8; MIB as usize];
    live.handle(8).unwrap().read(new, 0, &mut back).unwrap();
    assert!(back == block(2, MIB as usize), "the new file's bytes");
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// The first sighting of issue 35's "no space" (the data-plane bench's
/// metadata phase: two threads creating and removing 4 MiB files on a group
/// with about 50 AUs free). A removal's runs go to the discard drain, which
/// takes them all in one batch (up to 64 runs) and holds them through its
/// discards and until it gets the metadata lock; an allocation meanwhile
/// took back only runs still waiting, and found no space. Here the drain's
/// discard is held while a create needs that space: it is lent, and the
/// new file's first write waits for the discard (else the discard, landing
/// after it, would erase it: the simulated disk reads a discarded range as
/// zeros).
#[test]
fn space_whose_discard_is_in_flight_is_lent_and_its_first_write_waits() {
    let (_shared, live, held) = nearly_full_group(33, 2);
    live.meta(|g| g.create_file(&path("x"), 2 * MIB, &CreateOptions::default()))
        .unwrap()
        .unwrap();
    held.arm();
    live.meta(|g| g.remove(&path("x"))).unwrap().unwrap();
    assert!(held.wait_holding(), "the drain is discarding x's space");
    let made = live
        .meta(|g| g.create_file(&path("y"), 2 * MIB, &CreateOptions::default()))
        .unwrap();
    let y = made.expect("x's space, its discard in flight, lent").number;
    let writer = {
        let live = live.clone();
        std::thread::spawn(move || {
            live.handle(8)
                .unwrap()
                .write(y, 0, &block(3, 2 * MIB as usize))
        })
    };
    wait_for(
        || live.plane().lent_waits() > 0,
        "the first write waits for the discard",
    );
    held.release();
    writer.join().unwrap().unwrap();
    wait_for(|| live.discards_pending() == 0, "the drain ends");
    let mut back = vec![0u8; 2 * MIB as usize];
    live.handle(8).unwrap().read(y, 0, &mut back).unwrap();
    assert!(
        back == block(3, 2 * MIB as usize),
        "y's bytes, not {}",
        if back.iter().all(|b| *b == 0) {
            "zeros: the discard landed after them"
        } else {
            "these"
        }
    );
    let report = live.meta(|g| g.check(false)).unwrap().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}
