//! `hmn top`'s rows as the user moves among them: the selected row, its details and the
//! signal question (`k`), a long table scrolled to its last row, a row outside this PID
//! namespace, and a pid a later process takes.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use super::*;

#[test]
fn the_selected_row_its_details_and_the_signal_question() {
    use crate::top::model::Focus;
    use crate::top::state::Confirm;
    use crate::top::state::Nav;
    use crate::top::state::Sig;
    use ratatui::style::Modifier;

    let mut screen = two_gpus();
    let mut s = ViewState::default();
    s.follow(&screen.procs, 10);
    s.navigate(Nav::Down(1), &screen.procs, 10);
    let picked = s.selected.unwrap();
    assert_eq!(picked.pid, 5151, "the second row, by GPU memory");
    let (text, backend) = render(&screen, &s, 110, 24);
    check("selected", &text);
    // The selected row, and it alone, is drawn reversed across the width.
    let y = text.lines().position(|l| l.starts_with("5151")).unwrap();
    let reversed = |y: usize| {
        let y = u16::try_from(y).unwrap();
        (0..110).all(|x| {
            backend.buffer()[(x, y)]
                .modifier
                .contains(Modifier::REVERSED)
        })
    };
    assert!(reversed(y), "{text}");
    assert!(!reversed(y + 1), "{text}");

    // Enter: the details, with the history the sampler kept for it.
    s.inspect = true;
    screen.focus = Some(Focus {
        pid: 5151,
        history: vec![GIB, 2 * GIB, 20 * GIB],
        per_point: 1,
        refreshes: 3,
        age: Some(Duration::from_secs(3725)),
    });
    let (text, _) = render(&screen, &s, 110, 24);
    check("detail", &text);
    for want in [
        "process 5151",
        "python3 -m vllm.entrypoints.api_server",
        "user       bob",
        "started    1h2m ago",
        "GPU memory GPU 1 20.0 GiB",
        "history    ▁▁█",
        "peak 20.0 GiB over 3 refreshes (a point per refresh)",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }

    // k: the question names the pid, the command and the signal.
    s.inspect = false;
    s.confirm = Some(Confirm {
        pick: picked,
        command: "python3 -m vllm.entrypoints.api_server".into(),
        sig: Sig::Kill,
    });
    let (text, _) = render(&screen, &s, 110, 24);
    check("signal", &text);
    assert!(text.contains("Send SIGKILL to pid 5151?"), "{text}");
    // What happened, in the title line.
    s.confirm = None;
    s.message = Some(Err("not permitted to send SIGTERM to pid 5151".into()));
    let (text, _) = render(&screen, &s, 110, 24);
    assert!(
        text.lines().next().unwrap().contains("not permitted"),
        "{text}"
    );
}

#[test]
fn a_long_table_says_which_rows_it_shows_and_scrolls_to_the_last() {
    use crate::top::model::Proc;
    use crate::top::state::Nav;

    let mut screen = Screen::waiting();
    screen.gpus = Ok(Vec::new());
    screen.procs = std::sync::Arc::new(
        (1..=2000)
            .map(|pid| {
                let mut p = Proc::bare(pid);
                p.gpu.insert(0, u64::from(pid) * MIB);
                p
            })
            .collect(),
    );
    let mut s = ViewState::default();
    // The table's height at 100x30: the view draws it, the loop keeps it.
    let table = {
        let mut t = Terminal::new(TestBackend::new(100, 30)).unwrap();
        let mut area = ratatui::layout::Rect::default();
        t.draw(|f| area = draw(f, &screen, &s, Duration::from_secs(1), None))
            .unwrap();
        usize::from(area.height)
    };
    s.follow(&screen.procs, table);
    let (text, _) = render(&screen, &s, 100, 30);
    assert!(
        text.contains(&format!("rows 1–{} of 2000", table - 2)),
        "{text}"
    );
    s.navigate(Nav::End, &screen.procs, table);
    let (text, _) = render(&screen, &s, 100, 30);
    assert!(
        text.contains(&format!("rows {}–2000 of 2000", 2000 - (table - 2) + 1)),
        "{text}"
    );
    // Sorted by GPU memory, largest first: the last row is pid 1, selected.
    let last_row = text.lines().rev().nth(1).unwrap();
    assert!(last_row.starts_with("1 "), "{last_row:?}\n{text}");
    assert_eq!(s.selected.map(|p| p.pid), Some(1));
}

/// `k` on a row outside this PID namespace (the driver's number, which a local process may
/// have too) offers nothing: no question, a refusal that says why.
#[test]
fn k_on_a_process_outside_this_pid_namespace_offers_nothing() {
    use crate::top::model::Proc;

    let mut screen = Screen::waiting();
    screen.gpus = Ok(Vec::new());
    let mut p = Proc::bare(7);
    p.gpu.insert(0, 29 * GIB);
    p.outside = true;
    p.unreadable = Some(hypomnesis::UnreadableReason::OutsidePidNamespace);
    let mut hidden = Proc::bare(8);
    hidden.gpu.insert(0, GIB);
    hidden.outside = true;
    hidden.unreadable = Some(hypomnesis::UnreadableReason::HiddenByHidepid);
    screen.procs = std::sync::Arc::new(vec![p, hidden]);
    let mut s = ViewState::default();
    s.follow(&screen.procs, 10);
    assert_eq!(s.selected.map(|p| p.pid), Some(7), "the largest first");
    crate::top::events::ask_signal(&mut s, &screen);
    assert!(s.confirm.is_none(), "no question");
    let why = s.message.clone().unwrap().unwrap_err();
    assert!(why.contains("pid 7 is outside this PID namespace"), "{why}");
    s.navigate(crate::top::state::Nav::Down(1), &screen.procs, 10);
    s.message = None;
    crate::top::events::ask_signal(&mut s, &screen);
    assert!(s.confirm.is_none());
    assert!(
        s.message
            .clone()
            .unwrap()
            .unwrap_err()
            .contains("pid 8 cannot be read from here"),
        "{:?}",
        s.message
    );
}

/// A pid that a later process takes (another start time) is that process's row from then
/// on: new, its own start time, command and history; the first process's are not kept.
#[test]
fn a_reused_pid_is_the_later_process_row() {
    let mut b = Builder::default();
    let read = |command: &str, start: u64| {
        let mut c = ctx("alice", command, GIB, 10);
        c.start_time = Some(start);
        [(7_u32, c)]
            .into_iter()
            .collect::<BTreeMap<u32, Identity>>()
    };
    let f = |t| {
        frame(
            t,
            vec![(
                h200(0, 100 * GIB),
                vec![row(7, 0, 2 * GIB, GpuContextKind::Compute, "python3")],
            )],
        )
    };
    for t in 0..3 {
        b.screen(
            &f(t),
            |_| read("python3 first.py", 1000),
            ram(),
            &me(t),
            None,
        );
    }
    let first = b.screen(
        &f(3),
        |_| read("python3 first.py", 1000),
        ram(),
        &me(3),
        None,
    );
    assert_eq!(first.procs[0].start, Some(1000));
    let later = b.screen(
        &f(4),
        |_| read("python3 later.py", 2000),
        ram(),
        &me(4),
        None,
    );
    let p = &later.procs[0];
    assert_eq!(p.start, Some(2000), "the later process's start time");
    assert_eq!(p.change, crate::top::model::Change::New);
    assert_eq!(p.command.as_deref(), Some("python3 later.py"));
    let focused = b.screen(
        &f(5),
        |_| read("python3 later.py", 2000),
        ram(),
        &me(5),
        Some(7),
    );
    let history = focused.focus.map(|f| f.history).unwrap_or_default();
    assert_eq!(
        history.len(),
        2,
        "its history starts at its own first refresh: {history:?}"
    );
}
