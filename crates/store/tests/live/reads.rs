//! Reads of a mirror whose copies misbehave: a short read, a failed read
//! rewritten from the other copy, the caller's check seeing each copy once.

use super::*;

/// A read the engine reports short is not taken as data: the handle's
/// reused buffers hold old bytes past what was transferred. The read comes
/// from the other copy instead, whole.
#[test]
fn a_short_read_is_not_taken_as_data() {
    let FaultyMirror {
        live,
        number,
        fault,
        ..
    } = faulty_mirror(12);
    let mut h = live.handle(64).unwrap();
    let mut back = vec![0u8; 8192];
    h.read(number, 0, &mut back).unwrap();
    assert_eq!(back, block(7, 8192), "the block, before any fault");
    *fault.lock().unwrap() = ReadFault::Short;
    let mut back = vec![0u8; 8192];
    h.read(number, 0, &mut back).unwrap();
    assert_eq!(
        back,
        block(7, 8192),
        "the block whole, from the other copy, not the short one"
    );
}

/// A copy whose read fails once is not read again in the same operation
/// (where it might succeed and hide the fault): the read goes to the other
/// copy and the failed copy is rewritten from it.
#[test]
fn a_copy_that_fails_a_read_is_rewritten_from_the_other() {
    let FaultyMirror {
        live,
        number,
        fault,
        writes,
        ..
    } = faulty_mirror(13);
    let mut h = live.handle(64).unwrap();
    *fault.lock().unwrap() = ReadFault::FailOnce;
    let before = writes.load(std::sync::atomic::Ordering::SeqCst);
    let mut back = vec![0u8; 8192];
    h.read(number, 0, &mut back).unwrap();
    assert_eq!(back, block(7, 8192));
    assert!(
        writes.load(std::sync::atomic::Ordering::SeqCst) > before,
        "the primary copy was rewritten after its failed read"
    );
}

/// The caller's check sees each copy once: a primary copy whose bytes are
/// bad is rejected once, the mirror accepted, and the primary rewritten
/// with the mirror's bytes.
#[test]
fn the_callers_check_sees_each_copy_once() {
    let FaultyMirror {
        shared,
        ids,
        live,
        number,
        primary,
        ..
    } = faulty_mirror(14);
    // Damage the primary copy on its disk, behind the group's back.
    let mut raw = shared.handle();
    let device = ids[usize::from(primary.disk)];
    cairn_io::IoEngine::write_at(
        &mut raw,
        device,
        u64::from(primary.au) * MIB,
        cairn_io::AlignedBuf::from_slice(&block(9, 8192)),
        false,
    )
    .unwrap();
    let mut h = live.handle(64).unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let good = block(7, 8192);
    let mut back = vec![0u8; 8192];
    h.read_checked(number, 0, &mut back, &|bytes| {
        seen.lock().unwrap().push(bytes[0]);
        bytes == good.as_slice()
    })
    .unwrap();
    assert_eq!(back, good);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![block(9, 1)[0], good[0]],
        "the bad primary once, then the mirror"
    );
    let mut again = vec![0u8; 8192];
    let calls = std::sync::atomic::AtomicU32::new(0);
    h.read_checked(number, 0, &mut again, &|bytes| {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        bytes == good.as_slice()
    })
    .unwrap();
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the primary was rewritten: the next read takes it at once"
    );
}
